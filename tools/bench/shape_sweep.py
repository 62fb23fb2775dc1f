#!/usr/bin/python3
"""How much the server's memory grows under a client that sweeps distinct shapes.

usage: shape_sweep.py <reprise-server> <dir with the generated *_pb2.py stubs>
                      [--shapes N] [--budget BYTES] [--max-n N]

Starts reprise-server on 127.0.0.1 (free ports) over a temporary repository holding one
one-node Add model (x[1, n] + x, float, no batch axis), warms it up with 16 shapes, reads its
RSS (/proc/PID/status VmRSS), then sends N requests of distinct shapes [1, n] with n spread
over 64 ... --max-n, and reads the RSS again. Prints both, the growth, and the instance totals.
`--budget` sets capture.memory_budget_bytes. The server is stopped at the end.

This is a measurement, not a test: the numbers go in the hostile-input notes and docs.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loopback_server  # noqa: E402
from loopback_server import rss_bytes  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("stubs")
    parser.add_argument("--shapes", type=int, default=2000)
    parser.add_argument("--max-n", type=int, default=128000)
    parser.add_argument("--budget", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc
    import reprise_admin_pb2 as admin_pb
    import reprise_admin_pb2_grpc as admin_grpc

    tmp = tempfile.TemporaryDirectory()
    repo = os.path.join(tmp.name, "repo")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(os.path.join(repo, "add", "1"))
    onnx.save(model, os.path.join(repo, "add", "1", "model.onnx"))
    config = os.path.join(tmp.name, "server.yaml")
    with open(config, "w") as f:
        f.write(f"capture: {{memory_budget_bytes: {args.budget}}}\n")
    proc, port = loopback_server.start(args.server, config, repo,
                                       os.path.join(tmp.name, "server.log"), threads=1)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                    options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    while not stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready:
        time.sleep(0.1)

    def infer(n):
        r = pb.ModelInferRequest(model_name="add")
        r.inputs.add(name="x", datatype="FP32", shape=[1, n])
        r.raw_input_contents.append(np.ones(n, np.float32).tobytes())
        stub.ModelInfer(r, timeout=60)

    for n in range(1, 17):
        infer(n)
    before = rss_bytes(proc.pid)
    start = time.monotonic()
    sizes = np.linspace(64, args.max_n, args.shapes).astype(np.int64)
    for n in sizes:
        infer(int(n))
    elapsed = time.monotonic() - start
    after = rss_bytes(proc.pid)
    listing = admin_grpc.RuntimeInstancesStub(channel).ListInstances(
        admin_pb.ListInstancesRequest(model="add"), timeout=30)
    channel.close()
    proc.terminate()
    proc.wait(timeout=60)
    mib = 1 << 20
    print(f"shapes {args.shapes} (n = 64 ... {args.max_n}), budget {args.budget} bytes, "
          f"{elapsed:.1f} s")
    print(f"RSS after warm-up {before / mib:.1f} MiB, after the sweep {after / mib:.1f} MiB, "
          f"growth {(after - before) / mib:.1f} MiB")
    for v in listing.versions:
        print(f"instances: {len(listing.instances)} listed, {v.live_instances} live "
              f"({v.live_bytes} bytes), {v.captures} captures, {v.evictions} evictions, "
              f"{v.budget_refusals} budget refusals")


if __name__ == "__main__":
    main()
