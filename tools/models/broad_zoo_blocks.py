"""Builders of the broad zoo's models of other block designs (tools/models/export_broad_zoo.py
lists them): GhostNet's cheap-operation modules, ConvMixer, DGCNN's edge convolutions, an
EfficientDet-style BiFPN, Inception-ResNet's scaled residual blocks and NAFNet. Each takes the
torch module and returns an nn.Module with random weights.
"""


def conv_bn_relu(nn, cin, cout, kernel=3, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


def ghostnet_style(torch):
    nn = torch.nn

    # GhostNet's modules: a 1x1 conv makes half the channels, a cheap depthwise 3x3 conv of them
    # the other half, concatenated (channel counts that are not multiples of 16).
    class Ghost(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            half = cout // 2
            self.primary = conv_bn_relu(nn, cin, half, 1)
            self.cheap = nn.Sequential(nn.Conv2d(half, half, 3, 1, 1, groups=half, bias=False),
                                       nn.BatchNorm2d(half), nn.ReLU())

        def forward(self, x):
            y = self.primary(x)
            return torch.cat([y, self.cheap(y)], 1)

    layers, cin = [conv_bn_relu(nn, 3, 16, 3, 2)], 16
    for cout, stride in ((24, 2), (24, 1), (40, 2), (40, 1), (80, 2), (80, 1), (112, 1),
                         (160, 2), (160, 1)):
        mid = 3 * cout
        layers.append(Ghost(cin, mid))
        if stride == 2:
            layers.append(nn.Conv2d(mid, mid, 3, 2, 1, groups=mid, bias=False))
        layers.append(Ghost(mid, cout))
        cin = cout
    return nn.Sequential(*layers, conv_bn_relu(nn, cin, 960, 1), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(960, 1000))


def convmixer(torch):
    nn = torch.nn

    # ConvMixer-256/8: a 7x7/7 patch stem, then depthwise 9x9 convs with GELU and BatchNorm
    # in a residual, and pointwise ones.
    class Residual(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return x + self.inner(x)

    dim = 256
    blocks = [nn.Sequential(Residual(nn.Sequential(nn.Conv2d(dim, dim, 9, padding=4, groups=dim),
                                                   nn.GELU(), nn.BatchNorm2d(dim))),
                            nn.Conv2d(dim, dim, 1), nn.GELU(), nn.BatchNorm2d(dim))
              for _ in range(8)]
    return nn.Sequential(nn.Conv2d(3, dim, 7, 7), nn.GELU(), nn.BatchNorm2d(dim), *blocks,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(dim, 1000))


def dgcnn_cls(torch):
    nn = torch.nn

    # DGCNN's edge convolutions: each point's 16 nearest neighbours (TopK of negative squared
    # distances), their features gathered, a shared 1x1 conv over (neighbour - point, point),
    # and the maximum over the neighbours.
    def edges(x, k=16):
        b, c, n = x.shape
        distance = 2 * torch.matmul(x.transpose(2, 1), x) - (x ** 2).sum(1, keepdim=True)
        distance = distance - (x ** 2).sum(1, keepdim=True).transpose(2, 1)
        index = distance.topk(k, dim=-1)[1] + torch.arange(b).view(-1, 1, 1) * n
        points = x.transpose(2, 1).contiguous()
        near = points.view(b * n, c)[index.view(-1)].view(b, n, k, c)
        centre = points.view(b, n, 1, c).expand(-1, -1, k, -1)
        return torch.cat([near - centre, centre], 3).permute(0, 3, 1, 2)

    class Dgcnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.edge = nn.ModuleList(nn.Sequential(nn.Conv2d(2 * cin, cout, 1, bias=False),
                                                    nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))
                                      for cin, cout in ((3, 64), (64, 64), (64, 128)))
            self.mix = nn.Sequential(nn.Conv1d(256, 512, 1, bias=False), nn.BatchNorm1d(512),
                                     nn.LeakyReLU(0.2))
            self.head = nn.Linear(512, 40)

        def forward(self, x):
            features = []
            for conv in self.edge:
                x = conv(edges(x)).max(-1)[0]
                features.append(x)
            return self.head(self.mix(torch.cat(features, 1)).max(-1)[0])

    return Dgcnn()


def bifpn_detector(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # EfficientDet's BiFPN: three levels fused top-down and bottom-up by normalised weighted
    # sums, SiLU, and depthwise-separable convs; nearest upsampling and max-pool downsampling.
    class Fuse(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.weights = nn.Parameter(torch.ones(2))
            self.conv = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, groups=c, bias=False),
                                      nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, a, b):
            w = functional.relu(self.weights)
            w = w / (w.sum() + 1e-4)
            return self.conv(functional.silu(w[0] * a + w[1] * b))

    class BiFpn(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.fuse = nn.ModuleList(Fuse(c) for _ in range(4))

        def forward(self, p3, p4, p5):
            up = functional.interpolate
            p4 = self.fuse[0](p4, up(p5, scale_factor=2.0, mode="nearest"))
            p3 = self.fuse[1](p3, up(p4, scale_factor=2.0, mode="nearest"))
            p4 = self.fuse[2](p4, functional.max_pool2d(p3, 3, 2, 1))
            p5 = self.fuse[3](p5, functional.max_pool2d(p4, 3, 2, 1))
            return p3, p4, p5

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(conv_bn_relu(nn, 3, 32, 3, 2), conv_bn_relu(nn, 32, 64, 3, 2),
                                      conv_bn_relu(nn, 64, 64, 3, 2))
            self.down4 = conv_bn_relu(nn, 64, 64, 3, 2)
            self.down5 = conv_bn_relu(nn, 64, 64, 3, 2)
            self.fpn = nn.ModuleList(BiFpn() for _ in range(3))
            self.head = nn.Conv2d(64, 36, 3, padding=1)

        def forward(self, x):
            p3 = self.stem(x)
            p4 = self.down4(p3)
            p5 = self.down5(p4)
            for fpn in self.fpn:
                p3, p4, p5 = fpn(p3, p4, p5)
            return torch.cat([self.head(p).flatten(2) for p in (p3, p4, p5)], 2)

    return Detector()


def inception_resnet_style(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # Inception-ResNet's blocks: three branches concatenated, a 1x1 projection scaled by 0.17
    # and added to the block's input, then ReLU.
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.b0 = conv_bn_relu(nn, c, 32, 1)
            self.b1 = nn.Sequential(conv_bn_relu(nn, c, 32, 1), conv_bn_relu(nn, 32, 32))
            self.b2 = nn.Sequential(conv_bn_relu(nn, c, 32, 1), conv_bn_relu(nn, 32, 48),
                                    conv_bn_relu(nn, 48, 64))
            self.up = nn.Conv2d(128, c, 1)

        def forward(self, x):
            branches = torch.cat([self.b0(x), self.b1(x), self.b2(x)], 1)
            return functional.relu(x + 0.17 * self.up(branches))

    return nn.Sequential(conv_bn_relu(nn, 3, 32, 3, 2), conv_bn_relu(nn, 32, 64),
                         nn.MaxPool2d(3, 2), conv_bn_relu(nn, 64, 320, 1),
                         *[Block(320) for _ in range(6)], nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(320, 1000))


def nafnet_small(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # NAFNet's image restoration U-Net: LayerNorm over channels, depthwise 3x3, SimpleGate
    # (halves multiplied), simplified channel attention, PixelShuffle up, a global residual.
    class ChannelNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(1, c, 1, 1))
            self.bias = nn.Parameter(torch.zeros(1, c, 1, 1))

        def forward(self, x):
            mean = x.mean(1, keepdim=True)
            var = (x - mean).pow(2).mean(1, keepdim=True)
            return (x - mean) / torch.sqrt(var + 1e-6) * self.weight + self.bias

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n1, self.n2 = ChannelNorm(c), ChannelNorm(c)
            self.c1 = nn.Conv2d(c, 2 * c, 1)
            self.c2 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c)
            self.sca = nn.Conv2d(c, c, 1)
            self.c3, self.c5 = nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)
            self.c4 = nn.Conv2d(c, 2 * c, 1)

        def forward(self, x):
            a, b = self.c2(self.c1(self.n1(x))).chunk(2, 1)
            y = a * b
            x = x + self.c3(y * self.sca(functional.adaptive_avg_pool2d(y, 1)))
            a, b = self.c4(self.n2(x)).chunk(2, 1)
            return x + self.c5(a * b)

    class NafNet(nn.Module):
        def __init__(self, width=16):
            super().__init__()
            self.intro = nn.Conv2d(3, width, 3, padding=1)
            self.encoders, self.downs, self.ups, self.decoders = (nn.ModuleList() for _ in range(4))
            c = width
            for _ in range(3):
                self.encoders.append(Block(c))
                self.downs.append(nn.Conv2d(c, 2 * c, 2, 2))
                c *= 2
            self.middle = Block(c)
            for _ in range(3):
                self.ups.append(nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False),
                                              nn.PixelShuffle(2)))
                c //= 2
                self.decoders.append(Block(c))
            self.ending = nn.Conv2d(width, 3, 3, padding=1)

        def forward(self, x):
            y, skips = self.intro(x), []
            for encoder, down in zip(self.encoders, self.downs):
                y = encoder(y)
                skips.append(y)
                y = down(y)
            y = self.middle(y)
            for up, decoder, skip in zip(self.ups, self.decoders, reversed(skips)):
                y = decoder(up(y) + skip)
            return self.ending(y) + x

    return NafNet()
