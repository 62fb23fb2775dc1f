"""Starts the real reprise-server on 127.0.0.1 with free gRPC and metrics ports, for the deploy
tests (tests/deploy/*_test.py). Used as a context manager: the daemon is stopped on every path.
"""
import os
import re
import select
import signal
import socket
import subprocess
import time
import urllib.request

STARTED_GRPC = re.compile(rb"Started GRPCInferenceService at [^:]+:(\d+)")
STARTED_METRICS = re.compile(rb"Started Metrics Service at [^:]+:(\d+)")
READY = re.compile(rb"server ready")


def free_port():
    """A port nothing listens on now (the OS's choice for a socket bound to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc, timeout=20):
    """SIGTERM, then SIGKILL if it does not exit in `timeout` seconds; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class Daemon:
    """reprise-server over `repository`; .grpc_port, .metrics_port, .log once entered."""

    def __init__(self, server, repository, extra=()):
        self.args = [server, "--model-repository", repository, "--grpc-address=127.0.0.1",
                     "--grpc-port=0", "--http-port=0", "--metrics-port=0"] + list(extra)
        self.proc = None
        self.log = b""
        self.grpc_port = None
        self.metrics_port = None

    def __enter__(self):
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env)
        try:
            self._wait_for(READY, 60)
            for pattern, attr in ((STARTED_GRPC, "grpc_port"),
                                  (STARTED_METRICS, "metrics_port")):
                m = pattern.search(self.log)
                if not m:
                    raise RuntimeError("reprise-server did not log its %s:\n%s"
                                       % (attr, self.log.decode(errors="replace")))
                setattr(self, attr, int(m.group(1)))
        except BaseException:
            stop(self.proc)
            self.proc.stdout.close()
            raise
        return self

    def __exit__(self, *exc):
        code = stop(self.proc)
        rest = self.proc.stdout.read()  # the rest, once the daemon exited
        if rest:
            self.log += rest
        self.proc.stdout.close()
        self.exit_code = code
        # A clean SIGTERM shutdown exits 0 (a sanitizer report would not).
        if exc[0] is None and code != 0:
            raise AssertionError("reprise-server exited %d:\n%s"
                                 % (code, self.log.decode(errors="replace")[-5000:]))
        return False

    def _wait_for(self, pattern, seconds):
        deadline = time.monotonic() + seconds
        while not pattern.search(self.log):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("reprise-server did not get ready (exit %s):\n%s"
                                   % (self.proc.poll(), self.log.decode(errors="replace")))
            # Unbuffered reads: a buffered readline could leave lines in Python's buffer
            # where select() cannot see them.
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                self.log += os.read(self.proc.stdout.fileno(), 65536)

    def scrape(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()


def infer_mlp(stubs_dir, grpc_port, n):
    """Sends `n` ModelInfer requests for mlp (batch 1) and checks each one succeeded."""
    import sys
    sys.path.insert(0, stubs_dir)
    import grpc
    import numpy as np
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc
    with grpc.insecure_channel("127.0.0.1:%d" % grpc_port) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
        for _ in range(n):
            request = pb.ModelInferRequest(model_name="mlp")
            request.inputs.add(name="input", datatype="FP32", shape=[1, 64])
            request.raw_input_contents.append(x.tobytes())
            response = stub.ModelInfer(request, timeout=30)
            assert response.outputs[0].name == "output", response


def metric_families(text):
    """The family names that the exposition's # TYPE lines declare."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
