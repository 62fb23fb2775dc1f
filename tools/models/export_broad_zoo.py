#!/usr/bin/python3
"""Exports the broad benchmark zoo of issue 21 to ONNX, with random weights.

Architectures outside tools/models/zoo that users bring: one or two of each torchvision 0.14
classification family, the segmentation models, transformer encoders and decoders of a few
sizes built from torch.nn, recurrent models (the coverage issue's LSTM tagger and GRU
classifier, and larger ones), a few small models for single effects (a residual MLP of
many tiny layers, a U-Net, 1-D convolutions with GroupNorm) and architectures of other fields
(point clouds, a GAN generator, audio and time-series 1-D convolutions, style transfer, a speech
Conformer, MLP-Mixer), and blocks of other designs (tools/models/broad_zoo_blocks.py: GhostNet,
ConvMixer, DGCNN, a BiFPN, Inception-ResNet, NAFNet). `--list` prints every model with its input
shape and what it is.

    /usr/bin/python3 tools/models/export_broad_zoo.py --out DIR [--only a,b] [--force] [--list]

The conventions are tools/models/export_zoo.py's: DIR/<name>/model.onnx (opset 17, one input
`input` and one output `output`, both with a dynamic batch axis 0 named `batch`),
input_b1.npy and output_b1.npy (PyTorch's output for it), BatchNorm statistics calibrated on
random batches so that outputs stay O(1), deterministic seeds, and a VERSION file written last;
a model whose VERSION is current is not exported again (--force redoes it). Segmentation
models return their `out` head only. Every export is checked with onnx.checker. A model that
fails to export is reported with its exception and skipped; DIR/failed.json lists them.
Exit status 1 when any model failed, 0 otherwise. With Debian 12's PyTorch 1.13 /
torchvision 0.14, swin_v2_t fails ("Exporting the operator 'aten::zero' to ONNX opset version
17 is not supported": its attention zeroes part of the qkv bias in place); the other 61 export.
Left out to keep the benchmark's time sane: the larger variants of each family (resnet34/101/
152, vgg13-19 and the _bn ones, densenet161-201, efficientnet_b2-b7 and v2_m/l, regnet's larger
sizes, convnext_small-large, swin_s/b, vit_b_32/l/h, mnasnet0_75/1_3, shufflenet x1.5/x2.0,
resnext101, wide_resnet101, deeplabv3_resnet101, fcn_resnet101); detection, video, optical
flow and quantized models are not in the zoo.
"""
import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_zoo  # noqa: E402  (calibrate_batch_norm and the coverage issue's recurrent models)
from broad_zoo_blocks import (bifpn_detector, convmixer, dgcnn_cls, ghostnet_style,  # noqa: E402
                              inception_resnet_style, nafnet_small)

OPSET = 17  # as export_zoo.py
# Bumped whenever the exported files change; an existing export of another version is redone.
VERSION = "1"
IMAGE = (3, 224, 224)


def torchvision_model(fn, **kwargs):
    def build(torch):
        import torchvision
        return getattr(torchvision.models, fn)(weights=None, **kwargs)
    return build


def segmentation_model(fn, **kwargs):
    def build(torch):
        import torchvision

        class OutHead(torch.nn.Module):
            """torchvision's segmentation models return a dict; the `out` head is the model."""

            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)["out"]

        return OutHead(getattr(torchvision.models.segmentation, fn)(
            weights=None, weights_backbone=None, **kwargs))
    return build


def transformer_encoder(d, heads, ff, layers, causal=False, activation="relu", norm_first=False):
    def build(torch):
        nn = torch.nn

        class Encoder(nn.Module):
            """nn.TransformerEncoder (batch first); `causal` adds the square subsequent mask
            (a decoder-only, GPT-style stack)."""

            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1,
                                                   activation=activation, batch_first=True,
                                                   norm_first=norm_first)
                # enable_nested_tensor=False: the fast path has no ONNX export.
                self.stack = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                init_transformer(self.stack, nn)

            def forward(self, x):
                if not causal:
                    return self.stack(x)
                mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                return self.stack(x, mask=mask)

        return Encoder()
    return build


def transformer_seq2seq(d, heads, ff, layers):
    def build(torch):
        nn = torch.nn

        class Seq2Seq(nn.Module):
            """nn.Transformer: the input is the source, and (shifted by one step) the target
            of a decoder with a causal mask attending to the encoder's memory."""

            def __init__(self):
                super().__init__()
                self.t = nn.Transformer(d, heads, layers, layers, ff, dropout=0.1,
                                        batch_first=True)
                init_transformer(self.t, nn)

            def forward(self, x):
                tgt = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)
                mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                return self.t(x, tgt, tgt_mask=mask)

        return Seq2Seq()
    return build


def init_transformer(module, nn):
    # The layers start as copies of one another: give each its own weights.
    for p in module.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        else:
            nn.init.normal_(p, std=0.02)


def recurrent(kind, features, hidden, layers, bidirectional, per_step):
    def build(torch):
        nn = torch.nn

        class Recurrent(nn.Module):
            """An LSTM / GRU / RNN over the sequence (batch first); a Linear head on every
            step's state (a tagger) or on the last layer's final state (a classifier)."""

            def __init__(self):
                super().__init__()
                cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
                self.rnn = cls(features, hidden, num_layers=layers, bidirectional=bidirectional,
                               batch_first=True)
                self.head = nn.Linear(hidden * (2 if bidirectional else 1), 16)

            def forward(self, x):
                y, h = self.rnn(x)
                if per_step:
                    return self.head(y)
                h = h[0] if kind == "lstm" else h
                return self.head(h[-1])

        return Recurrent()
    return build


def from_export_zoo(name):
    return lambda torch: export_zoo.build(name, torch)[0]


def residual_mlp(blocks, width):
    def build(torch):
        nn = torch.nn

        class ResidualMlp(nn.Module):
            """x + relu(linear(x)), `blocks` times: per-operator overhead bound."""

            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
                for layer in self.layers:
                    nn.init.normal_(layer.weight, std=0.2 / width ** 0.5)  # keeps outputs O(1)

            def forward(self, x):
                for layer in self.layers:
                    x = x + torch.relu(layer(x))
                return x

        return ResidualMlp()
    return build


def feedforward_mlp(blocks, width, hidden):
    def build(torch):
        nn = torch.nn

        class FeedForwardMlp(nn.Module):
            """x + Linear hidden->width(relu(Linear width->hidden(x))), `blocks` times: a
            transformer's feed-forward layers at one token (products of one row)."""

            def __init__(self):
                super().__init__()
                self.up = nn.ModuleList(nn.Linear(width, hidden) for _ in range(blocks))
                self.down = nn.ModuleList(nn.Linear(hidden, width) for _ in range(blocks))
                for layer in list(self.up) + list(self.down):
                    nn.init.normal_(layer.weight, std=0.5 / layer.in_features ** 0.5)

            def forward(self, x):
                for up, down in zip(self.up, self.down):
                    x = x + down(torch.relu(up(x)))
                return x

        return FeedForwardMlp()
    return build


def unet_small(torch):
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        """Three levels (16/32/64 channels), max-pool down, ConvTranspose up, skips joined by
        Concat, a 1x1 head of 2 classes."""

        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = block(3, 16), block(16, 32), block(32, 64)
            self.up2, self.u2 = nn.ConvTranspose2d(64, 32, 2, stride=2), block(64, 32)
            self.up1, self.u1 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            m = self.mid(nn.functional.max_pool2d(b, 2))
            b = self.u2(torch.cat([self.up2(m), b], 1))
            a = self.u1(torch.cat([self.up1(b), a], 1))
            return self.head(a)

    return UNet()


def conv1d_groupnorm(torch):
    nn = torch.nn
    layers, cin = [], 1
    # wav2vec 2.0's feature encoder, narrowed: strided 1-D convolutions, GroupNorm after the
    # first, GELU after each.
    for i, (k, s) in enumerate([(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]):
        layers.append(nn.Conv1d(cin, 128, k, stride=s, bias=False))
        if i == 0:
            layers.append(nn.GroupNorm(128, 128))
        layers.append(nn.GELU())
        cin = 128
    return nn.Sequential(*layers)


def yolo_style(torch):
    nn = torch.nn

    def conv(cin, cout, k=1, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.SiLU())

    class Split(nn.Module):
        """Cross-stage block: a 1x1 convolution split in two, `n` residual pairs of 3x3
        convolutions on the second half, every part concatenated into a 1x1 convolution."""

        def __init__(self, cin, cout, n=1):
            super().__init__()
            self.c = cout // 2
            self.cv1, self.cv2 = conv(cin, 2 * self.c), conv((2 + n) * self.c, cout)
            self.m = nn.ModuleList(nn.Sequential(conv(self.c, self.c, 3), conv(self.c, self.c, 3))
                                   for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            for m in self.m:
                y.append(y[-1] + m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class Pyramid(nn.Module):
        """Spatial pyramid of three chained 5x5 stride-1 max pools, concatenated."""

        def __init__(self, cin, cout):
            super().__init__()
            self.cv1, self.cv2 = conv(cin, cin // 2), conv(cin * 2, cout)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            a = self.pool(x)
            b = self.pool(a)
            return self.cv2(torch.cat([x, a, b, self.pool(b)], 1))

    class Detector(nn.Module):
        """A small one-stage detector: strided SiLU backbone, nearest 2x upsampling and
        concatenation up the neck, 1x1 heads of 85 outputs per cell at two scales."""

        def __init__(self):
            super().__init__()
            self.backbone = nn.ModuleList([
                conv(3, 16, 3, 2), conv(16, 32, 3, 2), Split(32, 32), conv(32, 64, 3, 2),
                Split(64, 64, 2), conv(64, 128, 3, 2), Split(128, 128, 2), conv(128, 256, 3, 2),
                Split(256, 256), Pyramid(256, 256)])
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n1, self.n2 = Split(384, 128), Split(192, 64)
            self.down, self.n3 = conv(64, 64, 3, 2), Split(192, 128)
            self.heads = nn.ModuleList([nn.Conv2d(64, 85, 1), nn.Conv2d(128, 85, 1)])

        def forward(self, x):
            features = []
            for m in self.backbone:
                x = m(x)
                features.append(x)
            p4 = self.n1(torch.cat([self.up(x), features[6]], 1))
            p3 = self.n2(torch.cat([self.up(p4), features[4]], 1))
            n4 = self.n3(torch.cat([self.down(p3), p4], 1))
            return torch.cat([self.heads[0](p3).flatten(2), self.heads[1](n4).flatten(2)],
                             2).sigmoid()

    return Detector()


def super_resolution(torch):
    nn = torch.nn
    # ESPCN-style: tanh convolutions on the low-resolution image, a sub-pixel convolution of 9
    # channels rearranged by PixelShuffle (DepthToSpace) to 3x the size.
    return nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(),
                         nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(32, 9, 3, padding=1), nn.PixelShuffle(3))


def pointnet_cls(torch):
    nn = torch.nn

    # PointNet's classifier without its input transforms: shared per-point layers (pointwise
    # 1-D convolutions with BatchNorm), a max over the points, an MLP head.
    class PointNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [], 3
            for cout in (64, 128, 1024):
                layers += [nn.Conv1d(cin, cout, 1), nn.BatchNorm1d(cout), nn.ReLU()]
                cin = cout
            self.points = nn.Sequential(*layers)
            self.head = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256),
                                      nn.ReLU(), nn.Linear(256, 40))

        def forward(self, x):
            return self.head(torch.max(self.points(x), 2)[0])

    return PointNet()


def dcgan_generator(torch):
    nn = torch.nn
    # DCGAN's generator: 4x4 ConvTranspose layers (stride 2 after the first), BatchNorm, ReLU,
    # Tanh, from a 100-value code to a 64x64 image.
    layers, cin = [], 100
    for i, cout in enumerate((512, 256, 128, 64)):
        layers += [nn.ConvTranspose2d(cin, cout, 4, 1 if i == 0 else 2, 0 if i == 0 else 1,
                                      bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        cin = cout
    return nn.Sequential(*layers, nn.ConvTranspose2d(cin, 3, 4, 2, 1, bias=False), nn.Tanh())


def wavenet_style(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # WaveNet's stack: causal dilated width-2 convolutions (left Pad), tanh x sigmoid gates,
    # 1x1 residual and skip sums, 12 layers of 64 channels.
    class WaveNet(nn.Module):
        def __init__(self, channels=64, layers=12):
            super().__init__()
            self.dilations = [2 ** (i % 6) for i in range(layers)]
            self.inp = nn.Conv1d(1, channels, 1)
            self.filters = nn.ModuleList(nn.Conv1d(channels, channels, 2, dilation=d)
                                         for d in self.dilations)
            self.gates = nn.ModuleList(nn.Conv1d(channels, channels, 2, dilation=d)
                                       for d in self.dilations)
            self.res = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in self.dilations)
            self.out = nn.Conv1d(channels, 256, 1)

        def forward(self, x):
            x = self.inp(x)
            skip = 0
            for d, f, g, r in zip(self.dilations, self.filters, self.gates, self.res):
                padded = functional.pad(x, (d, 0))
                h = r(torch.tanh(f(padded)) * torch.sigmoid(g(padded)))
                x = x + h
                skip = skip + h
            return self.out(functional.relu(skip))

    return WaveNet()


def tcn_dilated(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # A temporal convolutional network: residual blocks of two dilated width-3 convolutions
    # with BatchNorm, 128 channels, dilations 1-8.
    class Tcn(nn.Module):
        def __init__(self, channels=128, blocks=8):
            super().__init__()
            self.inp = nn.Conv1d(40, channels, 1)

            def conv(d):
                return nn.Conv1d(channels, channels, 3, padding=d, dilation=d)

            self.blocks = nn.ModuleList(
                nn.Sequential(conv(2 ** (i % 4)), nn.BatchNorm1d(channels), nn.ReLU(),
                              conv(2 ** (i % 4)), nn.BatchNorm1d(channels))
                for i in range(blocks))
            self.out = nn.Conv1d(channels, 30, 1)

        def forward(self, x):
            x = self.inp(x)
            for block in self.blocks:
                x = functional.relu(x + block(x))
            return self.out(x)

    return Tcn()


def ecg_resnet1d(torch):
    nn = torch.nn

    # A 1-D ResNet for 12-lead ECG: a width-15 strided stem, max pooling, stages of width-7
    # convolutions with BatchNorm (strided at each stage's start), a mean over time.
    def stage(cin, cout, stride):
        return nn.Sequential(nn.Conv1d(cin, cout, 7, stride, 3, bias=False), nn.BatchNorm1d(cout),
                             nn.ReLU(), nn.Conv1d(cout, cout, 7, 1, 3, bias=False),
                             nn.BatchNorm1d(cout), nn.ReLU())

    class Ecg(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv1d(12, 64, 15, 2, 7), nn.BatchNorm1d(64), nn.ReLU(),
                                      nn.MaxPool1d(3, 2, 1), stage(64, 64, 1), stage(64, 128, 2),
                                      stage(128, 256, 2), stage(256, 512, 2))
            self.fc = nn.Linear(512, 5)

        def forward(self, x):
            return self.fc(self.body(x).mean(-1))

    return Ecg()


def style_transfer(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # Fast neural style transfer: reflection-padded convolutions with InstanceNorm, five
    # residual blocks, nearest 2x upsampling instead of transposed convolutions.
    def conv(cin, cout, k, stride=1, norm=True):
        layers = [nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, stride)]
        return nn.Sequential(*layers, nn.InstanceNorm2d(cout, affine=True), nn.ReLU()) \
            if norm else nn.Sequential(*layers)

    class Style(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(conv(3, 32, 9), conv(32, 64, 3, 2), conv(64, 128, 3, 2))
            self.res = nn.ModuleList(
                nn.Sequential(conv(128, 128, 3), conv(128, 128, 3, norm=False),
                              nn.InstanceNorm2d(128, affine=True)) for _ in range(5))
            self.up1, self.up2 = conv(128, 64, 3), conv(64, 32, 3)
            self.last = conv(32, 3, 9, norm=False)

        def forward(self, x):
            x = self.down(x)
            for block in self.res:
                x = x + block(x)
            x = self.up1(functional.interpolate(x, scale_factor=2, mode="nearest"))
            x = self.up2(functional.interpolate(x, scale_factor=2, mode="nearest"))
            return self.last(x)

    return Style()


def conformer_small(torch):
    nn = torch.nn
    functional = torch.nn.functional

    # A speech Conformer: 2-D convolutional subsampling, then blocks of half feed-forward,
    # self-attention, a convolution module (pointwise, GLU, depthwise width 31, BatchNorm, SiLU,
    # pointwise) and half feed-forward; d 144, 4 heads, 4 blocks.
    class Block(nn.Module):
        def __init__(self, d=144, heads=4, k=31):
            super().__init__()

            def feed_forward():
                return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                     nn.Linear(4 * d, d))

            self.ff1, self.ff2 = feed_forward(), feed_forward()
            self.norm_att = nn.LayerNorm(d)
            self.att = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm_conv = nn.LayerNorm(d)
            self.pw1, self.pw2 = nn.Conv1d(d, 2 * d, 1), nn.Conv1d(d, d, 1)
            self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.norm_out = nn.LayerNorm(d)

        def forward(self, x):
            x = x + 0.5 * self.ff1(x)
            y = self.norm_att(x)
            x = x + self.att(y, y, y, need_weights=False)[0]
            c = functional.glu(self.pw1(self.norm_conv(x).transpose(1, 2)), dim=1)
            c = self.pw2(functional.silu(self.bn(self.dw(c))))
            x = x + c.transpose(1, 2)
            return self.norm_out(x + 0.5 * self.ff2(x))

    class Conformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = nn.Sequential(nn.Conv2d(1, 144, 3, 2), nn.ReLU(), nn.Conv2d(144, 144, 3, 2),
                                     nn.ReLU())
            self.proj = nn.Linear(144 * 19, 144)
            self.blocks = nn.ModuleList(Block() for _ in range(4))

        def forward(self, x):
            x = self.sub(x.unsqueeze(1))
            x = self.proj(x.permute(0, 2, 1, 3).flatten(2))
            for block in self.blocks:
                x = block(x)
            return x

    return Conformer()


def mlp_mixer(torch):
    nn = torch.nn

    # MLP-Mixer: 16x16 patches, then blocks mixing across the 196 tokens (through a transpose)
    # and across the 256 channels, LayerNorm and GELU; 6 blocks.
    class MixerBlock(nn.Module):
        def __init__(self, d=256, tokens=196):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.tokens = nn.Sequential(nn.Linear(tokens, 256), nn.GELU(), nn.Linear(256, tokens))
            self.channels = nn.Sequential(nn.Linear(d, 1024), nn.GELU(), nn.Linear(1024, d))

        def forward(self, x):
            x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.channels(self.norm2(x))

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 256, 16, 16)
            self.blocks = nn.Sequential(*(MixerBlock() for _ in range(6)))
            self.norm = nn.LayerNorm(256)
            self.head = nn.Linear(256, 1000)

        def forward(self, x):
            x = self.blocks(self.stem(x).flatten(2).transpose(1, 2))
            return self.head(self.norm(x).mean(1))

    return Mixer()


# name: (builder, input shape without batch, what it is)
MODELS = {
    # torchvision classification, one or two per family, at 224x224 unless said.
    "alexnet": (torchvision_model("alexnet"), IMAGE, "AlexNet"),
    "vgg11": (torchvision_model("vgg11"), IMAGE, "VGG-11 (no BatchNorm)"),
    "resnet18": (torchvision_model("resnet18"), IMAGE, "ResNet-18"),
    "resnet50": (torchvision_model("resnet50"), IMAGE, "ResNet-50"),
    "resnext50_32x4d": (torchvision_model("resnext50_32x4d"), IMAGE,
                        "ResNeXt-50 32x4d (grouped 3x3 convolutions)"),
    "wide_resnet50_2": (torchvision_model("wide_resnet50_2"), IMAGE, "Wide ResNet-50-2"),
    "squeezenet1_0": (torchvision_model("squeezenet1_0"), IMAGE, "SqueezeNet 1.0 (fire modules)"),
    "squeezenet1_1": (torchvision_model("squeezenet1_1"), IMAGE, "SqueezeNet 1.1"),
    "densenet121": (torchvision_model("densenet121"), IMAGE, "DenseNet-121 (dense Concat)"),
    "googlenet": (torchvision_model("googlenet", aux_logits=False, init_weights=True), IMAGE,
                  "GoogLeNet (Inception v1: four-branch blocks)"),
    "inception_v3": (torchvision_model("inception_v3", aux_logits=False, init_weights=True),
                     (3, 299, 299), "Inception v3 at 299x299"),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), IMAGE, "MobileNetV2"),
    "mobilenet_v3_small": (torchvision_model("mobilenet_v3_small"), IMAGE,
                           "MobileNetV3 small (hard-swish, squeeze-and-excitation)"),
    "mobilenet_v3_large": (torchvision_model("mobilenet_v3_large"), IMAGE, "MobileNetV3 large"),
    "mnasnet0_5": (torchvision_model("mnasnet0_5"), IMAGE, "MnasNet 0.5"),
    "mnasnet1_0": (torchvision_model("mnasnet1_0"), IMAGE, "MnasNet 1.0"),
    "shufflenet_v2_x0_5": (torchvision_model("shufflenet_v2_x0_5"), IMAGE,
                           "ShuffleNetV2 x0.5 (channel shuffle, split)"),
    "shufflenet_v2_x1_0": (torchvision_model("shufflenet_v2_x1_0"), IMAGE, "ShuffleNetV2 x1.0"),
    "efficientnet_b0": (torchvision_model("efficientnet_b0"), IMAGE,
                        "EfficientNet-B0 (SiLU, squeeze-and-excitation, depthwise 5x5)"),
    "efficientnet_b1": (torchvision_model("efficientnet_b1"), IMAGE,
                        "EfficientNet-B1 (at 224x224, not its native 240)"),
    "efficientnet_v2_s": (torchvision_model("efficientnet_v2_s"), IMAGE,
                          "EfficientNetV2-S (fused MBConv; at 224x224, not its native 384)"),
    "regnet_x_400mf": (torchvision_model("regnet_x_400mf"), IMAGE, "RegNetX-400MF"),
    "regnet_y_400mf": (torchvision_model("regnet_y_400mf"), IMAGE,
                       "RegNetY-400MF (squeeze-and-excitation)"),
    "regnet_y_1_6gf": (torchvision_model("regnet_y_1_6gf"), IMAGE, "RegNetY-1.6GF"),
    "convnext_tiny": (torchvision_model("convnext_tiny"), IMAGE,
                      "ConvNeXt-T (depthwise 7x7, LayerNorm, GELU)"),
    "swin_t": (torchvision_model("swin_t"), IMAGE, "Swin-T (shifted windows)"),
    "swin_v2_t": (torchvision_model("swin_v2_t"), IMAGE, "Swin V2-T (cosine attention)"),
    "vit_b_16": (torchvision_model("vit_b_16"), IMAGE, "ViT-B/16"),
    "maxvit_t": (torchvision_model("maxvit_t"), IMAGE, "MaxViT-T (block and grid attention)"),
    # torchvision segmentation, at 224x224 (not the 520 of their weights), `out` head only.
    "fcn_resnet50": (segmentation_model("fcn_resnet50"), IMAGE,
                     "FCN, dilated ResNet-50 backbone, bilinear upsampling"),
    "deeplabv3_resnet50": (segmentation_model("deeplabv3_resnet50"), IMAGE,
                           "DeepLabV3 (ASPP), dilated ResNet-50 backbone"),
    "deeplabv3_mobilenet_v3_large": (segmentation_model("deeplabv3_mobilenet_v3_large"), IMAGE,
                                     "DeepLabV3 (ASPP) on MobileNetV3 large"),
    "lraspp_mobilenet_v3_large": (segmentation_model("lraspp_mobilenet_v3_large"), IMAGE,
                                  "LR-ASPP head on MobileNetV3 large (bilinear Resize)"),
    # torch.nn transformers: (sequence, d_model) inputs.
    "transformer_enc_d128": (transformer_encoder(128, 4, 512, 4), (64, 128),
                             "TransformerEncoder, 4 layers, d=128, 4 heads, seq 64"),
    "transformer_enc_d256": (transformer_encoder(256, 8, 1024, 4), (128, 256),
                             "TransformerEncoder, 4 layers, d=256, 8 heads, seq 128"),
    "transformer_enc_d512": (transformer_encoder(512, 8, 2048, 6, activation="gelu"), (128, 512),
                             "TransformerEncoder, 6 layers, d=512, 8 heads, GELU, seq 128"),
    "transformer_causal_d256": (transformer_encoder(256, 8, 1024, 4, causal=True,
                                                    activation="gelu", norm_first=True),
                                (128, 256), "decoder-only stack (causal mask), pre-norm, 4 "
                                "layers, d=256, GELU, seq 128"),
    "transformer_seq2seq_d256": (transformer_seq2seq(256, 8, 1024, 2), (64, 256),
                                 "nn.Transformer, 2+2 layers, d=256, causal decoder with "
                                 "cross-attention, seq 64"),
    # Recurrent: the coverage issue's (export_zoo) and larger ones. (sequence, features).
    "lstm_tagger": (from_export_zoo("lstm_tagger"), (12, 16),
                    "export_zoo's: 2-layer bidirectional LSTM 16->32, a tag per step"),
    "gru_classifier": (from_export_zoo("gru_classifier"), (20, 16),
                       "export_zoo's: GRU 16->32, last state classified"),
    "lstm_tagger_h256": (recurrent("lstm", 128, 256, 2, True, True), (64, 128),
                         "2-layer bidirectional LSTM 128->256, seq 64, a tag per step"),
    "gru_classifier_h256": (recurrent("gru", 64, 256, 2, False, False), (100, 64),
                            "2-layer GRU 64->256, seq 100, last state classified"),
    "rnn_tanh_h128": (recurrent("rnn", 64, 128, 1, False, True), (100, 64),
                      "1-layer tanh RNN 64->128, seq 100, a tag per step"),
    # Single effects.
    "residual_mlp64": (residual_mlp(64, 64), (64,),
                       "64 blocks of x + relu(Linear 64->64(x)): per-operator overhead bound"),
    "feedforward_mlp256": (feedforward_mlp(4, 256, 1024), (256,),
                           "4 blocks of x + Linear 1024->256(relu(Linear 256->1024(x))): "
                           "feed-forward layers at one token"),
    "unet_small": (unet_small, (3, 128, 128),
                   "3-level U-Net, ConvTranspose up, Concat skips, 128x128"),
    "conv1d_groupnorm": (conv1d_groupnorm, (1, 16000),
                         "strided Conv1d x7, GroupNorm, GELU (wav2vec-style), 1 s at 16 kHz"),
    "yolo_style": (yolo_style, (3, 320, 320),
                   "one-stage detector: SiLU, split/concat blocks, 5x5 max-pool pyramid, nearest "
                   "2x upsampling, two heads, 320x320"),
    "espcn_x3": (super_resolution, (1, 120, 160),
                 "ESPCN-style 3x super-resolution: Tanh convolutions, PixelShuffle, 120x160"),
    "pointnet_cls": (pointnet_cls, (3, 1024),
                     "PointNet classifier: pointwise Conv1d 3->64->128->1024, max over 1024 "
                     "points, MLP head"),
    "dcgan_generator": (dcgan_generator, (100, 1, 1),
                        "DCGAN generator: 4x4 ConvTranspose x5, BatchNorm, ReLU, Tanh, to 64x64"),
    "wavenet_style": (wavenet_style, (1, 4000),
                      "WaveNet-style: causal dilated Conv1d x24, tanh x sigmoid gates, 1x1 "
                      "residual and skip sums, 4000 samples"),
    "tcn_dilated": (tcn_dilated, (40, 1000),
                    "temporal convolutional network: dilated width-3 Conv1d residual blocks, "
                    "BatchNorm, 40x1000"),
    "ecg_resnet1d": (ecg_resnet1d, (12, 2500),
                     "1-D ResNet for 12-lead ECG: width-15/7 Conv1d, BatchNorm, MaxPool1d, "
                     "mean over time, 2500 samples"),
    "style_transfer": (style_transfer, (3, 128, 128),
                       "fast neural style transfer: ReflectionPad, InstanceNorm, residual blocks, "
                       "nearest upsampling, 128x128"),
    "conformer_small": (conformer_small, (200, 80),
                        "speech Conformer: Conv2d subsampling, 4 blocks of feed-forward, "
                        "attention and depthwise width-31 Conv1d with GLU, 200 frames"),
    "mlp_mixer": (mlp_mixer, IMAGE,
                  "MLP-Mixer: 16x16 patches, token and channel MLPs, LayerNorm, GELU, 6 blocks"),
    "ghostnet_style": (ghostnet_style, IMAGE,
                       "GhostNet-style: 1x1 conv halves and cheap depthwise halves concatenated "
                       "(36 + 36 channels ...), depthwise stride-2 convs"),
    "convmixer_256_8": (convmixer, IMAGE,
                        "ConvMixer-256/8: 7x7/7 patches, depthwise 9x9 with GELU and BatchNorm in "
                        "a residual, pointwise convs"),
    "dgcnn_cls": (dgcnn_cls, (3, 1024),
                  "DGCNN: 16-nearest-neighbour graphs (TopK), gathered edge features, 1x1 convs, "
                  "max over neighbours, 1024 points"),
    "bifpn_detector": (bifpn_detector, (3, 256, 256),
                       "EfficientDet-style BiFPN x3: normalised weighted sums, SiLU, depthwise-"
                       "separable convs, nearest up / max-pool down, 256x256"),
    "inception_resnet_style": (inception_resnet_style, IMAGE,
                               "Inception-ResNet-style blocks x6: three branches concatenated, "
                               "1x1 projection scaled by 0.17 plus the input, ReLU"),
    "nafnet_small": (nafnet_small, (3, 128, 128),
                     "NAFNet image restoration U-Net, width 16: channel LayerNorm, depthwise "
                     "3x3, SimpleGate, channel attention, PixelShuffle, 128x128"),
}


def is_current(out_dir, name):
    return export_zoo.is_current(out_dir, name, VERSION)


def export(name, out_dir, torch, np, onnx):
    builder, sample_shape, _ = MODELS[name]
    torch.manual_seed(1234)
    model = builder(torch)
    export_zoo.calibrate_batch_norm(model, sample_shape, torch)
    model.eval()
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.onnx")
    tmp = path + ".tmp"
    # Exported with gradients enabled (TransformerEncoder's fast path is off then).
    torch.onnx.export(model, (torch.randn(2, *sample_shape),), tmp, opset_version=OPSET,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    onnx.checker.check_model(tmp)
    with torch.no_grad():
        x = torch.randn(1, *sample_shape)
        y = model(x)
    np.save(os.path.join(directory, "input_b1.npy"), x.numpy())
    np.save(os.path.join(directory, "output_b1.npy"), y.numpy())
    os.replace(tmp, path)
    # VERSION is written last: its presence means the set is complete and current.
    with open(os.path.join(directory, "VERSION"), "w") as f:
        f.write(VERSION + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="output folder (required unless --list)")
    parser.add_argument("--only", help="comma-separated models (default: all)")
    parser.add_argument("--force", action="store_true", help="re-export current models")
    parser.add_argument("--list", action="store_true", help="print the models and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, shape, what) in MODELS.items():
            print(f"{name:30} {'x'.join(map(str, shape)):12} {what}")
        return 0
    if not args.out:
        parser.error("--out is required")
    names = [n for n in args.only.split(",") if n] if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)} (--list prints them)")
    todo = [n for n in names if args.force or not is_current(args.out, n)]
    for n in names:
        if n not in todo:
            print(f"export_broad_zoo: {n} is current in {args.out}")
    if not todo:
        return 0
    import numpy as np
    import onnx
    import torch
    torch.set_num_threads(1)
    failed = {}
    for name in todo:
        start = time.monotonic()
        try:
            export(name, args.out, torch, np, onnx)
        except Exception as e:  # noqa: BLE001  a failed model is a finding, reported and skipped
            failed[name] = f"{type(e).__name__}: {e}".strip()[:2000]
            print(f"export_broad_zoo: {name} FAILED: {failed[name]}", file=sys.stderr)
            traceback.print_exc(limit=3)
            continue
        size = os.path.getsize(os.path.join(args.out, name, "model.onnx")) / 2**20
        print(f"export_broad_zoo: {name} exported ({size:.1f} MiB) in "
              f"{time.monotonic() - start:.1f} s", flush=True)
    # failed.json: this run's failures plus earlier ones that are still not exported.
    record = os.path.join(args.out, "failed.json")
    try:
        with open(record) as f:
            earlier = json.load(f)
    except (OSError, ValueError):
        earlier = {}
    earlier = {n: why for n, why in earlier.items() if n in MODELS and not is_current(args.out, n)}
    earlier.update(failed)
    with open(record, "w") as f:
        json.dump(earlier, f, indent=1)
    if failed:
        print(f"export_broad_zoo: {len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
