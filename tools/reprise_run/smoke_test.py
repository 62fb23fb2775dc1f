#!/usr/bin/python3
"""End-to-end check of reprise-run on a small Add/Mul/Sub/Div model built here with onnx.

    smoke_test.py PATH/TO/reprise-run

Checks: outputs written as .npy equal NumPy's result; --json prints one JSON object with the
timing fields; --mode replay (the default) and --mode eager give the same outputs, replay
captures and reports the capture time; --dump-ri writes JSON naming the ops; a bad input gives
exit status 1 and a message naming the input.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path):
    w = numpy_helper.from_array(np.array([1.0, 2.0, 4.0], dtype=np.float32), "w")
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"]),
        helper.make_node("Mul", ["a", "y"], ["b"]),
        helper.make_node("Sub", ["b", "x"], ["c"]),
        helper.make_node("Div", ["c", "w"], ["out"]),
        helper.make_node("Identity", ["a"], ["sum"]),
    ]
    graph = helper.make_graph(
        nodes, "smoke",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["N", 3])],
        [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, check=False)


def main():
    tool = sys.argv[1]
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "smoke.onnx")
        make_model(model)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((5, 3)).astype(np.float32)
        y = rng.standard_normal((1, 3)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        w = np.array([1.0, 2.0, 4.0], dtype=np.float32)
        a = x + w
        expected = ((a * y) - x) / w
        for mode in ("replay", "eager", None):
            out_dir = os.path.join(tmp, f"out_{mode}")
            mode_args = ["--mode", mode] if mode else []
            r = run(tool, "--model", model, "--input", f"x={tmp}/x.npy", "--input",
                    f"y={tmp}/y.npy", "--output-dir", out_dir, "--iterations", "5", "--warmup",
                    "1", "--json", *mode_args)
            check(r.returncode == 0, f"run ({mode}) failed: {r.stderr}")
            if r.returncode != 0:
                continue
            summary = json.loads(r.stdout)
            for key in ("min_us", "median_us", "p90_us", "max_us", "plan_us", "capture_us",
                        "arena_bytes", "intermediate_bytes", "state", "replayed"):
                check(key in summary, f"--json lacks {key}: {r.stdout}")
            check(summary["min_us"] <= summary["median_us"] <= summary["max_us"],
                  f"timings out of order: {r.stdout}")
            check(summary["mode"] == (mode or "replay"), f"mode: {r.stdout}")
            if summary["mode"] == "replay":
                check(summary["state"] == "captured" and summary["replayed"] is True
                      and summary["capture_us"] > 0, f"replay did not capture: {r.stdout}")
            else:
                check(summary["state"] == "eager" and summary["replayed"] is False
                      and summary["capture_us"] == 0, f"eager captured: {r.stdout}")
            got = np.load(os.path.join(out_dir, "out.npy"))
            check(got.shape == (5, 3) and np.allclose(got, expected, rtol=1e-6, atol=1e-6),
                  f"out.npy ({mode}) differs: {got} vs {expected}")
            got_sum = np.load(os.path.join(out_dir, "sum.npy"))
            check(np.allclose(got_sum, a), f"sum.npy ({mode}) differs")

        dump = os.path.join(tmp, "ri.json")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--dump-ri", dump, "--iterations", "2")
        check(r.returncode == 0 and "capture=" in r.stdout, f"--dump-ri: {r.stdout}{r.stderr}")
        if r.returncode == 0:
            with open(dump) as f:
                d = json.load(f)
            ops = [t["op"] for s in d["streams"] for t in s["tasks"] if t["kind"] == "kernel"]
            check(ops == ["Add", "Mul", "Sub", "Div"], f"dumped ops: {ops}")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--mode", "eager", "--dump-ri", dump)
        check(r.returncode == 1 and "--dump-ri needs --mode replay" in r.stderr,
              f"--dump-ri in eager mode: {r.stderr}")

        r = run(tool, "--model", model, "--input", "x=random", "--shape", "x=2x3",
                "--input", "y=zeros", "--iterations", "3")
        check(r.returncode == 0 and "median=" in r.stdout, f"text summary: {r.stdout}{r.stderr}")

        r = run(tool, "--model", model, "--input", "x=random", "--shape", "x=2x4")
        check(r.returncode == 1 and '"x"' in r.stderr, f"bad shape not reported: {r.stderr}")

        r = run(tool, "--model", model, "--shape", "x=2x3", "--mode", "other")
        check(r.returncode == 2 and "--mode is eager or replay" in r.stderr, f"mode: {r.stderr}")

        r = run(tool, "--model", os.path.join(tmp, "missing.onnx"))
        check(r.returncode == 1 and "missing.onnx" in r.stderr, f"missing model: {r.stderr}")

        r = run(tool, "--bogus")
        check(r.returncode == 2, "usage error should exit 2")

    for f in failures:
        print("FAIL:", f)
    print("reprise_run_smoke:", "ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
