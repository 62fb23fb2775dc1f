"""Reading a reprise-server's output until it says where it listens (the daemon tests)."""
import re
import select
import time

STARTED_GRPC = re.compile(rb"Started GRPCInferenceService at [^:]+:(\d+)")
STARTED_METRICS = re.compile(rb"Started Metrics Service at [^:]+:(\d+)")


def read_until_started(proc, seconds=30):
    """Reads `proc`'s stdout (a pipe, unbuffered) line by line until the gRPC port is logged.
    Returns (log bytes, gRPC port or None, metrics port or None); None when the process ended
    or `seconds` passed first."""
    log, grpc_port, metrics_port = b"", None, None
    deadline = time.monotonic() + seconds
    while grpc_port is None and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not ready:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        log += line
        m = STARTED_METRICS.search(line)
        if m:
            metrics_port = int(m.group(1))
        m = STARTED_GRPC.search(line)
        if m:
            grpc_port = int(m.group(1))
    return log, grpc_port, metrics_port
