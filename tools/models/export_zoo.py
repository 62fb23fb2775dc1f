#!/usr/bin/python3
"""Exports the model zoo that the engine is tested on, with random weights.

Each model is written to OUT/<name>/model.onnx (opset 17, dynamic batch on axis 0 of every
input and output) with reference pairs input_b{1,4}.npy / output_b{1,4}.npy computed by
PyTorch. Models: mlp, mlp48 (48 Linear+ReLU layers of width 32, each with a residual add),
resnet18, resnet50, mobilenet_v2, transformer (a 4-layer encoder), lstm_tagger (a 2-layer
bidirectional LSTM with a per-step Linear head), gru_classifier (a GRU whose last state feeds
a Linear head), swin_small_input (torchvision's Swin Transformer, shifted-window attention
with its Mod / ScatterND masks, at two stages of width 32 on 56x56 images) and detection_head
(a small convolutional box and score head whose boxes go through torchvision's nms, exported as
NonMaxSuppression; the output's length follows the input's values), gated_branch (a head chosen
by the sign of the input's sum: an If), greedy_decoder (greedy decoding of up to 10 tokens that
stops when every row emits token 0: a Loop with a data-dependent condition; both scripted with
torch.jit.script), googlenet (torchvision's GoogLeNet: Inception blocks of four branches
joined by a Concat, the engine's test of branches forked onto parallel streams) and qdq_cnn (a small CNN,
conv + batch norm + ReLU, a depthwise conv, a residual add and a Linear head, quantized to QDQ
form by tools/models/quantize_qdq.py; its reference outputs are the float model's, from PyTorch,
and its float ONNX model is kept as model_float.onnx).

    /usr/bin/python3 tools/models/export_zoo.py --out DIR [--models mlp,transformer] [--force]
        [--reprise-run PATH]

qdq_cnn calibrates its activation ranges with reprise-run (default: build/release/tools/
reprise-run in the source tree); where it is missing that model is not exported, with a message.

Needs python3-torch and python3-torchvision (Debian). Without torch it prints why and exits 0
so that tests skip instead of failing (--require-torch makes that exit 1). Deterministic: the
same seed always gives the same weights and inputs.
"""
import argparse
import os
import sys
import time

ALL = ["mlp", "mlp48", "resnet18", "resnet50", "mobilenet_v2", "transformer", "lstm_tagger",
       "gru_classifier", "swin_small_input", "detection_head", "qdq_cnn", "gated_branch",
       "greedy_decoder", "googlenet"]
# Models with Python control flow, exported through torch.jit.script (If and Loop nodes).
SCRIPTED = {"gated_branch", "greedy_decoder"}
# Bumped whenever the exported files change; an existing export of another version is redone.
VERSION = "2"


def build(name, torch):
    nn = torch.nn
    if name == "mlp":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, 10))
        return model, (64,)
    if name == "mlp48":
        class ResidualMlp(nn.Module):
            """x + relu(linear(x)), 48 times at width 32: many small steps (dispatch-bound)."""

            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(48))
                for layer in self.layers:
                    nn.init.normal_(layer.weight, std=0.2 / 32 ** 0.5)  # keeps outputs O(1)

            def forward(self, x):
                for layer in self.layers:
                    x = x + torch.relu(layer(x))
                return x

        return ResidualMlp(), (32,)
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None), (3, 224, 224)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    if name == "googlenet":
        import torchvision
        return torchvision.models.googlenet(weights=None, aux_logits=False,
                                            init_weights=True), (3, 224, 224)
    if name == "mobilenet_v2":
        import torchvision
        return torchvision.models.mobilenet_v2(weights=None), (3, 224, 224)
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                           dropout=0.1, batch_first=True)
        # enable_nested_tensor=False: the fast path has no ONNX export.
        model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
        # The layers start as copies of one another: give each its own weights.
        for sub in model.layers:
            for p in sub.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                else:
                    nn.init.normal_(p, std=0.02)
        return model, (16, 64)
    if name == "lstm_tagger":
        class Tagger(nn.Module):
            """A tag per step: 2-layer bidirectional LSTM, then Linear on each step's state."""

            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(16, 32, num_layers=2, bidirectional=True, batch_first=True)
                self.head = nn.Linear(64, 8)

            def forward(self, x):
                y, _ = self.lstm(x)
                return self.head(y)

        return Tagger(), (12, 16)
    if name == "gru_classifier":
        class Classifier(nn.Module):
            """A GRU over the sequence; its last state is classified."""

            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(16, 32, batch_first=True)
                self.head = nn.Linear(32, 5)

            def forward(self, x):
                _, h = self.gru(x)
                return self.head(h[-1])

        return Classifier(), (20, 16)
    if name == "swin_small_input":
        from torchvision.models.swin_transformer import SwinTransformer
        model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                window_size=[7, 7], num_classes=10)
        return model, (3, 56, 56)
    if name == "detection_head":
        import torchvision

        class DetectionHead(nn.Module):
            """Boxes and scores per cell of a 8x8 feature map; the boxes NMS keeps, by score."""

            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                                              nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
                self.box = nn.Conv2d(16, 4, 1)
                self.score = nn.Conv2d(16, 1, 1)

            def forward(self, x):
                f = self.features(x)
                # One image: cells become candidate boxes [x1, y1, x2, y2] around their centres.
                b = self.box(f)[0].flatten(1).t()
                ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
                centres = torch.stack([xs.flatten(), ys.flatten()], 1) * 4.0
                half = 3.0 + 3.0 * torch.sigmoid(b[:, 2:])
                boxes = torch.cat([centres + b[:, :2] - half, centres + b[:, :2] + half], 1)
                scores = torch.sigmoid(self.score(f)[0].flatten())
                keep = torchvision.ops.nms(boxes, scores, 0.4)
                return torch.cat([boxes[keep], scores[keep].unsqueeze(1)], 1)

        return DetectionHead(), (3, 32, 32)
    if name == "qdq_cnn":
        class SmallCnn(nn.Module):
            """Conv-BN-ReLU stem, a strided conv, a depthwise + pointwise pair added back to its
            input, global average pooling and a Linear head: each kind of weight the QDQ
            rewrite quantizes (dense and grouped conv, Gemm)."""

            def __init__(self):
                super().__init__()
                self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16),
                                          nn.ReLU(),
                                          nn.Conv2d(16, 32, 3, stride=2, padding=1),
                                          nn.BatchNorm2d(32), nn.ReLU())
                self.block = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=32),
                                           nn.BatchNorm2d(32), nn.ReLU(),
                                           nn.Conv2d(32, 32, 1), nn.BatchNorm2d(32))
                self.head = nn.Linear(32, 10)

            def forward(self, x):
                x = self.stem(x)
                x = torch.relu(x + self.block(x))
                return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

        return SmallCnn(), (3, 32, 32)
    if name == "gated_branch":
        class GatedBranch(nn.Module):
            """A data-dependent branch (an ONNX If): the sign of the input's sum picks one of
            two heads of the same shape."""

            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(16, 32)
                self.a = nn.Linear(32, 8)
                self.b = nn.Linear(32, 8)

            def forward(self, x):
                h = torch.relu(self.inp(x))
                if bool(x.sum() > 0):
                    y = torch.sigmoid(self.a(h))
                else:
                    y = torch.tanh(self.b(h)) * 2.0
                return y

        return GatedBranch(), (16,)
    if name == "greedy_decoder":
        class GreedyDecoder(nn.Module):
            """Greedy decoding (an ONNX Loop with a data-dependent condition): a recurrent cell
            emits the arg-max token step by step into a fixed buffer of 10 positions, until
            every row emits token 0 or the buffer is full."""

            def __init__(self):
                super().__init__()
                self.max_len = 10
                self.enc = nn.Linear(16, 32)
                self.emb = nn.Embedding(12, 32)
                self.cell = nn.Linear(64, 32)
                self.out = nn.Linear(32, 12)

            def forward(self, x):
                h = torch.tanh(self.enc(x))
                tokens = torch.zeros(x.shape[0], self.max_len, dtype=torch.long)
                tok = torch.zeros(x.shape[0], dtype=torch.long)
                positions = torch.arange(self.max_len)
                i = 0
                done = False
                while i < self.max_len and not done:
                    h = torch.tanh(self.cell(torch.cat([self.emb(tok), h], 1)))
                    tok = torch.argmax(self.out(h), 1)
                    tokens = tokens + tok.unsqueeze(1) * (positions == i).long().unsqueeze(0)
                    done = bool((tok == 0).all())
                    i += 1
                return tokens

        return GreedyDecoder(), (16,)
    raise ValueError(f"unknown model {name}")


def quantizer():
    """tools/models/quantize_qdq.py, imported on first use (it needs onnx)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import quantize_qdq
    return quantize_qdq


def calibrate_batch_norm(model, sample_shape, torch):
    """Sets BatchNorm running statistics from random batches. With the default statistics
    (mean 0, variance 1) random-weight activations shrink layer by layer: MobileNetV2's outputs
    come out around 1e-9, too small to compare anything. Calibrated, outputs are O(1)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(8, *sample_shape))


def export(name, out_dir, torch, np, reprise_run=None):
    torch.manual_seed(1234)
    model, sample_shape = build(name, torch)
    calibrate_batch_norm(model, sample_shape, torch)
    model.eval()
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    example = torch.randn(2, *sample_shape)
    path = os.path.join(directory, "model.onnx")
    tmp = path + ".tmp"
    if name == "qdq_cnn":
        # The float model is exported beside, then quantized into model.onnx (below).
        tmp = os.path.join(directory, "model_float.onnx")
    if name in SCRIPTED:
        model = torch.jit.script(model)
    # Exported with gradients enabled (TransformerEncoder's fast path is off then).
    torch.onnx.export(model, (example,), tmp, opset_version=17, input_names=["input"],
                      output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.no_grad():
        for batch in (1, 4):
            x = torch.randn(batch, *sample_shape)
            if name == "gated_branch" and bool(x.sum() > 0) != (batch == 1):
                x = -x  # batch 1 takes the first branch, batch 4 the second
            y = model(x)
            np.save(os.path.join(directory, f"input_b{batch}.npy"), x.numpy())
            np.save(os.path.join(directory, f"output_b{batch}.npy"), y.numpy())
    if name == "qdq_cnn":
        quantize_qdq = quantizer()
        quantize_qdq.quantize_file(tmp, path, reprise_run or quantize_qdq.DEFAULT_REPRISE_RUN)
    else:
        os.replace(tmp, path)
    # VERSION is written last: its presence means the set is complete and current.
    with open(os.path.join(directory, "VERSION"), "w") as f:
        f.write(VERSION + "\n")


def is_current(out_dir, name, version=VERSION):
    """True when DIR/<name>/VERSION holds `version` (the set was written whole by it)."""
    try:
        with open(os.path.join(out_dir, name, "VERSION")) as f:
            return f.read().strip() == version
    except OSError:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default=",".join(ALL))
    parser.add_argument("--force", action="store_true", help="re-export existing models")
    parser.add_argument("--require-torch", action="store_true")
    parser.add_argument("--reprise-run", help="the reprise-run binary that calibrates qdq_cnn")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in ALL:
            parser.error(f"unknown model {n!r} (known: {', '.join(ALL)})")
    todo = [n for n in names if args.force or not is_current(args.out, n)]
    if not todo:
        print(f"export_zoo: {', '.join(names)} already in {args.out}")
        return 0
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"export_zoo: skipped, PyTorch is not installed ({e}); "
              "apt-get install python3-torch python3-torchvision")
        return 1 if args.require_torch else 0
    torch.set_num_threads(1)
    for name in todo:
        if name == "qdq_cnn":
            runner = args.reprise_run or quantizer().DEFAULT_REPRISE_RUN
            if not os.access(runner, os.X_OK):
                print(f"export_zoo: qdq_cnn skipped, no reprise-run at {runner} to calibrate it "
                      "(build the reprise-run target or give --reprise-run)")
                continue
        start = time.monotonic()
        export(name, args.out, torch, np, args.reprise_run)
        print(f"export_zoo: {name} exported to {os.path.join(args.out, name)} "
              f"in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
