#!/usr/bin/python3
"""Compares a QDQ model (tools/models/quantize_qdq.py) with its float original, both run by
reprise-run on the same inputs.

    /usr/bin/python3 tools/models/qdq_accuracy.py --float M.onnx --qdq M_qdq.onnx
        [--inputs input_b1.npy,input_b4.npy] [--random 3 --batch 8] [--reprise-run PATH]

For each input prints max |qdq - float| / max |float| over the output and the top-1 agreement
(the argmax of each row of the output, flattened to [batch, -1], is the same in both), then the
totals. The random inputs are standard normal from seed 2020 + k (not the calibration seed).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

DEFAULT_REPRISE_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                   "build", "release", "tools", "reprise-run")


def run(reprise_run, model, input_name, x_path, out_dir):
    cmd = [reprise_run, "--model", model, "--input", f"{input_name}={x_path}", "--output-dir",
           out_dir, "--iterations", "1", "--warmup", "0"]
    subprocess.run(cmd, check=True, capture_output=True)
    files = sorted(os.listdir(out_dir))
    if len(files) != 1:
        raise RuntimeError(f"{model}: expected one output, got {files}")
    return np.load(os.path.join(out_dir, files[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--float", required=True)
    parser.add_argument("--qdq", required=True)
    parser.add_argument("--inputs", default="", help="comma-separated .npy files")
    parser.add_argument("--random", type=int, default=0, help="how many random inputs")
    parser.add_argument("--batch", type=int, default=8, help="the batch of the random inputs")
    parser.add_argument("--reprise-run", default=DEFAULT_REPRISE_RUN)
    args = parser.parse_args()
    model = onnx.load(args.float, load_external_data=False)
    init_names = {t.name for t in model.graph.initializer}
    feed = next(i for i in model.graph.input if i.name not in init_names)
    dims = [d.dim_value if d.HasField("dim_value") else args.batch
            for d in feed.type.tensor_type.shape.dim]
    worst, agree, rows = 0.0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(os.path.basename(p), p) for p in args.inputs.split(",") if p]
        for k in range(args.random):
            path = os.path.join(tmp, f"random{k}.npy")
            np.save(path, np.random.RandomState(2020 + k).standard_normal(dims).astype(np.float32))
            cases.append((f"random seed {2020 + k} batch {args.batch}", path))
        for k, (label, path) in enumerate(cases):
            f, q = (run(args.reprise_run, m, feed.name, path, os.path.join(tmp, f"{which}{k}"))
                    for which, m in (("float", args.float), ("qdq", args.qdq)))
            relative = float(np.abs(q - f).max() / np.abs(f).max())
            f2, q2 = f.reshape(f.shape[0], -1), q.reshape(q.shape[0], -1)
            same = int((f2.argmax(1) == q2.argmax(1)).sum())
            worst, agree, rows = max(worst, relative), agree + same, rows + f2.shape[0]
            print(f"{label}: max abs diff {np.abs(q - f).max():.4g}, max |float| "
                  f"{np.abs(f).max():.4g}, relative {relative:.4g}, top-1 {same}/{f2.shape[0]}")
    print(f"all: worst relative {worst:.4g}, top-1 agreement {agree}/{rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
