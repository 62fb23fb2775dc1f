#!/usr/bin/python3
"""CI smoke test of reprise-bench (a few seconds; asserts no timing).

usage: bench_smoke_test.py <reprise-server> <reprise-bench> <reprise-echo> <source dir>

Starts reprise-server on a free 127.0.0.1 port with the zoo MLP, runs reprise-bench briefly in
concurrency mode (a two-level sweep, batch 2, random data) and in request-rate mode, parses
its JSON and CSV and checks that the counts add up: sent = ok + failed per level, the kept
windows' counts, and the server's inference count delta = OK requests x batch. Then the same
against reprise-echo (the transport floor, no server statistics). Every process started here
is stopped in every path.
"""
import csv
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SERVER, BENCH, ECHO, SOURCE = sys.argv[1:5]
MLP_REPO = os.path.join(SOURCE, "tools", "models", "repository", "mlp")
MLP_INPUT = os.path.join(SOURCE, "tools", "models", "zoo", "mlp", "input_b1.npy")


def start(args, pattern, ready_pattern, env=None):
    """Starts a server and waits (30 s at most) for its port and its ready line."""
    # Unbuffered: select() sees the pipe, so no line may wait in a Python-side buffer.
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            bufsize=0)
    log, port, ready = b"", None, False
    deadline = time.monotonic() + 30
    while not ready and time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not r:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        log += line
        m = re.search(pattern, line)
        if m:
            port = int(m.group(1))
        if port is not None and re.search(ready_pattern, line):
            ready = True
    if not ready:
        stop(proc)
        raise AssertionError("did not start: " + log.decode(errors="replace"))
    return proc, port


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    proc.stdout.close()


def run_bench(args, timeout=60):
    return subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=timeout)


class BenchSmokeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="reprise_bench_smoke_")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            stop(p)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_daemon(self):
        repo = os.path.join(self.tmp, "repo")
        shutil.copytree(MLP_REPO, os.path.join(repo, "mlp"))
        config = os.path.join(self.tmp, "server.yaml")
        with open(config, "w") as f:
            f.write("runtime: {cpu_threads: 2}\n")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc, port = start([SERVER, "--config", config, "--model-repository", repo,
                            "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0", "--metrics-port=0"],
                           rb"Started GRPCInferenceService at [^:]+:(\d+)", rb"server ready", env)
        self.procs.append(proc)
        return "127.0.0.1:%d" % port

    def check_level(self, level, batch, server):
        self.assertGreater(level["ok"], 0)
        self.assertEqual(level["failed"], 0)
        self.assertEqual(level["sent"], level["ok"] + level["failed"])
        self.assertEqual(level["windows"], len(level["window_counts"]))
        self.assertGreaterEqual(level["windows"], min(3, level["windows"]))
        self.assertEqual(level["measured_requests"], sum(level["window_counts"][-3:]))
        self.assertEqual(level["measured_ok"], level["measured_requests"])
        self.assertLessEqual(level["measured_requests"], level["ok"])
        self.assertAlmostEqual(level["inferences_per_s"],
                               level["measured_ok"] * batch / level["seconds"],
                               delta=0.01 * level["inferences_per_s"] + 0.01)
        pcts = [level[k] for k in ("p50_us", "p90_us", "p95_us", "p99_us", "max_us")]
        self.assertEqual(pcts, sorted(pcts))
        self.assertGreater(pcts[0], 0)
        if server:
            self.assertIsNotNone(level["server"])
            self.assertGreater(level["server"]["compute_infer_us"], 0)
        else:
            self.assertIsNone(level["server"])

    def test_concurrency_sweep_counts_add_up(self):
        addr = self.start_daemon()
        out_json = os.path.join(self.tmp, "r.json")
        out_csv = os.path.join(self.tmp, "r.csv")
        r = run_bench(["--model", "mlp", "--addr", addr, "-b", "2", "--concurrency", "1:3:2",
                       "--measurement-interval-ms", "200", "--max-windows", "3",
                       "--warmup-ms", "100", "--json", out_json, "--csv", out_csv])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("concurrency", r.stdout)  # the table
        with open(out_json) as f:
            result = json.load(f)
        self.assertTrue(result["server_stats"])
        self.assertEqual([lv["level"] for lv in result["levels"]], [1, 3])
        for level in result["levels"]:
            self.check_level(level, 2, server=True)
        total_ok = sum(lv["ok"] for lv in result["levels"])
        self.assertEqual(result["client_inferences_ok"], 2 * total_ok)
        self.assertEqual(result["server_inference_count_delta"], 2 * total_ok)
        with open(out_csv) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 2)
        for row, level in zip(rows, result["levels"]):
            self.assertEqual(int(row["ok"]), level["ok"])
            self.assertEqual(int(row["sent"]), level["sent"])
            self.assertAlmostEqual(float(row["p99_us"]), level["p99_us"], delta=0.01)

    def test_request_rate_and_count_windows(self):
        addr = self.start_daemon()
        out_json = os.path.join(self.tmp, "rate.json")
        r = run_bench(["--model", "mlp", "--addr", addr, "--input", "input=" + MLP_INPUT,
                       "--request-rate", "100", "--measurement-request-count", "20",
                       "--max-windows", "3", "--warmup-ms", "100", "--json", out_json,
                       "--no-progress"])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out_json) as f:
            result = json.load(f)
        self.assertEqual(result["mode"], "request_rate")
        level = result["levels"][0]
        self.check_level(level, 1, server=True)
        for count in level["window_counts"]:
            self.assertGreaterEqual(count, 20)  # a count window ends after 20 completions
        self.assertEqual(result["server_inference_count_delta"], level["ok"])

    def test_echo_transport_floor(self):
        proc, port = start([ECHO, "--port", "0", "--max-seconds", "60"],
                           rb"Started echo server at [^:]+:(\d+)", rb"Started echo server")
        self.procs.append(proc)
        out_json = os.path.join(self.tmp, "echo.json")
        r = run_bench(["--model", "echo", "--addr", "127.0.0.1:%d" % port, "--input",
                       "input=" + MLP_INPUT, "--concurrency", "1",
                       "--measurement-interval-ms", "200", "--max-windows", "3",
                       "--warmup-ms", "100", "--json", out_json])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out_json) as f:
            result = json.load(f)
        self.assertFalse(result["server_stats"])
        self.check_level(result["levels"][0], 1, server=False)

    def test_usage_errors_exit_2(self):
        r = run_bench(["--model", "mlp", "--addr", ""])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--addr is empty", r.stderr)
        r = run_bench(["--concurrency", "1"])
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
