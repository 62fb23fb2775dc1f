#!/usr/bin/env python3
"""The request path against a bare gRPC echo: reprise-server (the example repository's mlp,
batching off) and reprise-echo, measured alternately by reprise-bench in one run, on an idle
machine and on a loaded one (a busy loop keeping one core busy).

    /usr/bin/python3 tools/bench/request_path.py [--build-dir build/release] [--runs 5]
        [--load idle,loaded] [--json OUT.json] [--flame-svg OUT.svg]
        [--server BIN --echo BIN --bench BIN]

Each run measures, per load: echo then reprise (the order flips every run) at concurrency 1
(p50) and at concurrency 16 (throughput). The table gives the median over runs and the ratio
reprise / echo of the medians. --flame-svg records the server with `perf record -g` during a
concurrency-1 run and draws the flame graph with tools/bench/flamegraph.py.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_INPUT = os.path.join(ROOT, "tools", "models", "zoo", "mlp", "input_b1.npy")


def start(args, log_path, port_re, timeout_s=120):
    log = open(log_path, "wb")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log_path, "rb") as f:
            text = f.read()
        m = re.search(port_re, text)
        if m and (b"server ready" in text or b"echo" in text):
            return proc, int(m.group(1))
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"request_path.py: {args[0]} did not start; see {log_path}")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench(bench_bin, port, model, concurrency, out_json, window_ms):
    args = [bench_bin, "--model", model, "--addr", f"127.0.0.1:{port}", "--concurrency",
            str(concurrency), "--input", "input=" + MODEL_INPUT, "--measurement-interval-ms",
            str(window_ms), "--max-windows", "4", "--warmup-ms", "300", "--json", out_json,
            "--no-progress", "--no-server-stats"]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    with open(out_json) as f:
        level = json.load(f)["levels"][0]
    return {"p50_us": level["p50_us"], "mean_us": level["mean_us"],
            "infer_per_s": level["inferences_per_s"], "command": " ".join(args)}


def busy_loop():
    """A process that keeps one core busy until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--server")
    parser.add_argument("--echo")
    parser.add_argument("--bench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--load", default="idle,loaded")
    parser.add_argument("--window-ms", type=int, default=1000)
    parser.add_argument("--json")
    parser.add_argument("--flame-svg")
    parser.add_argument("--flame-title", default="reprise-server, mlp, concurrency 1")
    parser.add_argument("--work", default="/tmp/reprise-request-path")
    args = parser.parse_args()
    server_bin = args.server or os.path.join(args.build_dir, "server", "reprise-server")
    echo_bin = args.echo or os.path.join(args.build_dir, "tools", "reprise-echo")
    bench_bin = args.bench or os.path.join(args.build_dir, "tools", "reprise-bench")
    os.makedirs(args.work, exist_ok=True)

    server, port = start([server_bin, "--config", os.path.join(ROOT, "config", "reprise.yaml"),
                          "--model-repository", os.path.join(ROOT, "tools", "models",
                                                             "repository"),
                          "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                          "--metrics-port=0"], os.path.join(args.work, "server.log"),
                         rb"Started GRPCInferenceService at [^:]+:(\d+)")
    echo, echo_port = start([echo_bin, "--port", "0", "--max-seconds", "3600"],
                            os.path.join(args.work, "echo.log"),
                            rb"Started echo server at [^:]+:(\d+)")
    results = {"runs": [], "server": server_bin, "echo": echo_bin}
    try:
        for load in args.load.split(","):
            hog = busy_loop() if load == "loaded" else None
            try:
                for run in range(args.runs):
                    targets = [("echo", echo_port, "echo"), ("reprise", port, "mlp")]
                    if run % 2:
                        targets.reverse()
                    for target, p, model in targets:
                        for c in (1, 16):
                            out = os.path.join(args.work, f"{load}_{target}_c{c}_{run}.json")
                            r = bench(bench_bin, p, model, c, out, args.window_ms)
                            r.update(load=load, target=target, concurrency=c, run=run)
                            results["runs"].append(r)
                    print(f"{load}: run {run + 1}/{args.runs} done", file=sys.stderr)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
        if args.flame_svg:
            data = os.path.join(args.work, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-o", data, "-p",
                                     str(server.pid)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            bench(bench_bin, port, "mlp", 1, os.path.join(args.work, "flame.json"), 2000)
            perf.send_signal(signal.SIGINT)
            perf.wait()
            script = subprocess.run(["perf", "script", "-i", data], capture_output=True,
                                    check=True)
            with open(args.flame_svg, "wb") as f:
                subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench",
                                                             "flamegraph.py"), "--threads",
                                "--title", args.flame_title], input=script.stdout, stdout=f,
                               check=True)
    finally:
        stop(server)
        stop(echo)

    print("| machine | concurrency | echo | reprise | reprise / echo |")
    print("| --- | ---: | --- | --- | ---: |")
    summary = []
    for load in args.load.split(","):
        for c, key, unit in ((1, "p50_us", "µs p50"), (16, "infer_per_s", "infer/s")):
            med = {}
            for target in ("echo", "reprise"):
                vals = [r[key] for r in results["runs"]
                        if r["load"] == load and r["target"] == target and r["concurrency"] == c]
                med[target] = statistics.median(vals)
            ratio = med["reprise"] / med["echo"]
            summary.append(dict(load=load, concurrency=c, metric=key, echo=med["echo"],
                                reprise=med["reprise"], ratio=ratio))
            print(f"| {load} | {c} | {med['echo']:.1f} {unit} | {med['reprise']:.1f} {unit} | "
                  f"{ratio:.2f} |")
    results["summary"] = summary
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
