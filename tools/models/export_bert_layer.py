#!/usr/bin/python3
"""Exports a BERT-style encoder layer at opset 13, the form older exporters emit: LayerNorm
decomposed into ReduceMean / Sub / Pow / Sqrt / Div / Mul / Add, GELU as Erf arithmetic,
attention as MatMul(Q, Transpose(K)) / sqrt(d) → Add(mask) → Softmax → MatMul(V).

The benchmark does not run it by default; it is the measurement model of the transformer
rewrites (runtime/engine/fusion_transformer.h, docs/development.md).

    /usr/bin/python3 tools/models/export_bert_layer.py --out DIR [--layers 2] [--seq 32]
        [--gelu none|tanh]

Writes DIR/model.onnx (input "input" [batch, seq, hidden], dynamic batch; output "output")
and input_b{1,8}.npy / output_b{1,8}.npy computed by PyTorch. Needs python3-torch.
"""
import argparse
import math
import os
import sys


def build(torch, hidden, heads, ffn, layers, seq, gelu):
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(hidden, hidden)
            self.k = nn.Linear(hidden, hidden)
            self.v = nn.Linear(hidden, hidden)
            self.o = nn.Linear(hidden, hidden)
            self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
            self.up = nn.Linear(hidden, ffn)
            self.down = nn.Linear(ffn, hidden)
            self.ln2 = nn.LayerNorm(hidden, eps=1e-12)
            # An additive mask, as BERT builds it from its attention mask: the last positions
            # are padding.
            mask = torch.zeros(1, 1, 1, seq)
            mask[..., seq - seq // 8:] = -10000.0
            self.register_buffer("mask", mask)
            for p in (self.ln1.weight, self.ln1.bias, self.ln2.weight, self.ln2.bias):
                nn.init.normal_(p, mean=1.0 if p.dim() == 1 and p is self.ln1.weight else 0.0,
                                std=0.1)

        def heads(self, t):
            b, s, _ = t.shape
            return t.reshape(b, s, heads, hidden // heads).transpose(1, 2)

        def forward(self, x):
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads)
            probs = torch.softmax(scores + self.mask, dim=-1)
            ctx = torch.matmul(probs, v).transpose(1, 2)
            ctx = ctx.reshape(ctx.shape[0], ctx.shape[1], hidden)
            h = self.ln1(x + self.o(ctx))
            f = self.down(nn.functional.gelu(self.up(h), approximate=gelu))
            return self.ln2(h + f)

    return nn.Sequential(*[Layer() for _ in range(layers)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--gelu", choices=["none", "tanh"], default="none",
                        help="GELU form (tanh: the approximation GPT-2 uses)")
    args = parser.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"export_bert_layer: PyTorch is not installed ({e})")
        return 1
    torch.manual_seed(4321)
    torch.set_num_threads(1)
    model = build(torch, args.hidden, args.heads, args.ffn, args.layers, args.seq,
                  args.gelu).eval()
    os.makedirs(args.out, exist_ok=True)
    example = torch.randn(2, args.seq, args.hidden)
    path = os.path.join(args.out, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (example,), path, opset_version=13, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        for batch in (1, 8):
            x = torch.randn(batch, args.seq, args.hidden)
            np.save(os.path.join(args.out, f"input_b{batch}.npy"), x.numpy())
            np.save(os.path.join(args.out, f"output_b{batch}.npy"), model(x).numpy())
    print(f"export_bert_layer: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
