#!/usr/bin/python3
"""PyTorch's side of the batch-1 benchmark: eager vs CUDA-graph replay of the zoo's
architectures (MLP, 4-layer transformer encoder, ResNet-18), timed like cuda_zoo_bench
(per inference: pinned host->device copy of the input, the model, device->host copy of the
output, a synchronise; median of --iters).

    python3 tools/gpu/torch_bench.py [--iters 200] [--models mlp,transformer,resnet18]
    python3 tools/gpu/torch_bench.py --export-resnet18 DIR   # DIR/model.onnx + input_b1.npy

Prints one line per model; prints why and exits 0 when torch or a CUDA device is missing.
The architectures are those of tools/models/export_zoo.py (random weights: timing only).
"""
import argparse
import os
import sys
import time


def build(name, torch):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                             nn.Linear(64, 10)), (64,)
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                           dropout=0.1, batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), (16, 64)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    raise ValueError(name)


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def bench(name, torch, iters, warmup):
    model, shape = build(name, torch)
    model = model.eval().cuda()
    host_in = torch.randn((1,) + shape).pin_memory()
    with torch.no_grad():
        static_in = torch.empty((1,) + shape, device="cuda")
        static_in.copy_(host_in)
        probe = model(static_in)
        host_out = torch.empty(probe.shape).pin_memory()

        def eager():
            static_in.copy_(host_in, non_blocking=True)
            out = model(static_in)
            host_out.copy_(out, non_blocking=True)

        def timed(fn):
            for _ in range(warmup):
                fn()
                torch.cuda.synchronize()
            micros = []
            for _ in range(iters):
                start = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                micros.append((time.perf_counter() - start) * 1e6)
            return median(micros)

        eager_us = timed(eager)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eager()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_in.copy_(host_in, non_blocking=True)
            static_out = model(static_in)
            host_out.copy_(static_out, non_blocking=True)
        graph_us = timed(graph.replay)
    print(f"torch {name}: eager_us={eager_us:.1f} graph_us={graph_us:.1f} "
          f"speedup={eager_us / graph_us:.2f}x (torch {torch.__version__})", flush=True)


def export_resnet18(out_dir, torch):
    import numpy
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model, shape = build("resnet18", torch)
    model.eval()
    x = torch.randn((1,) + shape)
    path = os.path.join(out_dir, "model.onnx")
    kwargs = dict(opset_version=17, input_names=["input"], output_names=["output"])
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:  # torch without the dynamo argument (1.x): the TorchScript exporter
        torch.onnx.export(model, (x,), path, **kwargs)
    except Exception as error:  # no TorchScript exporter left: the dynamo one
        print(f"TorchScript export failed ({error}); trying the dynamo exporter")
        torch.onnx.export(model, (x,), path, dynamo=True, external_data=False, **kwargs)
    numpy.save(os.path.join(out_dir, "input_b1.npy"), x.numpy())
    with torch.no_grad():
        numpy.save(os.path.join(out_dir, "output_b1.npy"), model(x).numpy())
    print(f"exported resnet18 to {path}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--models", default="mlp,transformer,resnet18")
    parser.add_argument("--export-resnet18", metavar="DIR")
    args = parser.parse_args()
    try:
        import torch
    except ImportError as error:
        print(f"torch: SKIP (not importable: {error})")
        return 0
    if args.export_resnet18:
        export_resnet18(args.export_resnet18, torch)
        return 0
    if not torch.cuda.is_available():
        print(f"torch: SKIP (torch {torch.__version__} sees no CUDA device)")
        return 0
    for name in args.models.split(","):
        try:
            bench(name, torch, args.iters, args.warmup)
        except Exception as error:  # report and go on with the next model
            print(f"torch {name}: ERROR {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
