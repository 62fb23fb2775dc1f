"""reprise-server on 127.0.0.1 for the measurement scripts of tools/bench (shape_sweep.py,
distinct_inputs.py): started on free ports with a config file and a model repository, and its
resident memory."""
import os
import re
import subprocess
import sys
import time

STARTED = re.compile(rb"Started GRPCInferenceService at [^:]+:(\d+)")


def start(server, config, repo, log_path, threads, timeout_s=120):
    """Starts `server` (gRPC, HTTP and metrics on free loopback ports, OMP_NUM_THREADS=threads,
    its output in log_path) and returns (process, gRPC port) once it listens; exits with the log
    when it does not start within timeout_s."""
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [server, "--config", config, "--model-repository", repo,
             "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0", "--metrics-port=0"],
            stdout=log_file, stderr=subprocess.STDOUT,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log_path, "rb") as f:
            m = STARTED.search(f.read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.1)
    proc.kill()
    with open(log_path, "rb") as f:
        sys.exit("reprise-server did not start:\n" + f.read().decode(errors="replace"))


def rss_bytes(pid):
    """The resident memory of process `pid` (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")
