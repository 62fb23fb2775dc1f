#!/usr/bin/python3
"""End-to-end check of reprise-run on a small Add/Mul/Sub/Div model built here with onnx.

    smoke_test.py PATH/TO/reprise-run

Checks: outputs written as .npy equal NumPy's result; --json prints one JSON object with the
timing fields; --mode replay (the default) and --mode eager give the same outputs, replay
captures and reports the capture time; --dump-ri writes JSON naming the ops; --profile writes a
Chrome-trace JSON with one span per plan step per run, nested in its run, on a stream's row, and
prints the table; the kernel option flags are accepted (bad values exit 2); a bad input gives exit
status 1 and a message naming the input.
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


def check_trace(path, mode, kernels, runs, check):
    """The trace is Chrome-trace JSON: complete events with pid / tid / ts / dur (us), a
    thread_name for each row, one step span per plan step per run named "<node> (<kernel>)",
    in plan order and within its run's span."""
    with open(path) as f:
        d = json.load(f)
    events = d["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    check(all(isinstance(e[k], (int, float)) for e in spans for k in ("pid", "tid", "ts", "dur"))
          and all(e["dur"] >= 0 for e in spans), f"{mode}: malformed complete events")
    check({e["tid"] for e in spans} <= set(names), f"{mode}: a row without a thread_name")
    check(d["otherData"]["mode"] == mode, f"{mode}: mode {d['otherData']}")
    run_spans = {e["args"]["run"]: e for e in spans if e["cat"] == "run"}
    check(sorted(run_spans) == list(range(runs)), f"{mode}: runs {sorted(run_spans)}")
    for r, outer in run_spans.items():
        steps = sorted((e for e in spans if e["cat"] == "step" and e["args"]["run"] == r),
                       key=lambda e: e["ts"])
        check([e["args"]["kernel"] for e in steps] == kernels, f"{mode} run {r}: {steps}")
        check([e["args"]["step"] for e in steps] == list(range(len(kernels))),
              f"{mode} run {r}: step indices")
        check(all(e["name"] == f"{e['args']['node']} ({e['args']['kernel']})" for e in steps),
              f"{mode} run {r}: span names")
        check(all(outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]
                  + 0.001 for e in steps), f"{mode} run {r}: a step outside its run")
        want = "stream 0" if mode == "replay" else "eager steps (calling thread)"
        check(all(names[e["tid"]] == want for e in steps), f"{mode}: rows {names}")


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
        for mode in ("replay", "eager"):
            trace = os.path.join(tmp, f"trace_{mode}.json")
            r = run(tool, "--model", model, "--shape", "x=2x3", "--iterations", "3", "--mode", mode,
                    "--profile", trace, "--profile-top", "3")
            check(r.returncode == 0 and "top 3 steps by total time" in r.stdout
                  and "outside kernels" in r.stdout, f"--profile ({mode}): {r.stdout}{r.stderr}")
            if r.returncode == 0:
                check_trace(trace, mode, ["Add", "Mul", "Sub", "Div"], 3, check)
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

        # The CPU device's kernel options (the model has no convolution: the flags are accepted
        # and change nothing).
        r = run(tool, "--model", model, "--input", f"x={tmp}/x.npy", "--input", f"y={tmp}/y.npy",
                "--output-dir", os.path.join(tmp, "out_options"), "--iterations", "2",
                "--conv-winograd", "off", "--conv-taps", "off", "--conv-tap-regions", "off",
                "--conv-chain-layout=nhwc", "--clear-outputs", "on", "--threads", "2")
        check(r.returncode == 0, f"kernel options: {r.stderr}")
        if r.returncode == 0:
            got = np.load(os.path.join(tmp, "out_options", "out.npy"))
            check(np.allclose(got, expected, rtol=1e-6, atol=1e-6), "kernel options: out.npy")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--conv-chain-layout", "nchw16c")
        check(r.returncode == 2 and "--conv-chain-layout is auto or nhwc" in r.stderr,
              f"chain layout: {r.stderr}")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--clear-outputs", "maybe")
        check(r.returncode == 2 and "--clear-outputs is auto, on or off" in r.stderr,
              f"clear outputs: {r.stderr}")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--conv-winograd", "maybe")
        check(r.returncode == 2 and "--conv-winograd is on or off" in r.stderr,
              f"winograd: {r.stderr}")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--conv-taps", "maybe")
        check(r.returncode == 2 and "--conv-taps is on or off" in r.stderr, f"taps: {r.stderr}")
        r = run(tool, "--model", model, "--shape", "x=2x3", "--conv-tap-regions", "maybe")
        check(r.returncode == 2 and "--conv-tap-regions is on or off" in r.stderr,
              f"tap regions: {r.stderr}")

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
