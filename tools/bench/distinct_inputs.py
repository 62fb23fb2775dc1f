#!/usr/bin/python3
"""Request latency of reprise-server for a model fed a distinct input each time.

    /usr/bin/python3 tools/bench/distinct_inputs.py SERVER STUBS MODEL.onnx INPUT.npy
        [--requests 4] [--threads 2] [--input-name input]

SERVER is reprise-server, STUBS the folder of the generated *_pb2.py (BUILD/proto/python).
Starts the server on 127.0.0.1 (free ports) over a temporary repository holding MODEL as
"model" (one stream of --threads intra-op threads), sends --requests requests in turn over gRPC:
INPUT.npy first, then INPUT.npy plus seeded noise (0.01) each time, and prints each request's
time and the server's resident memory (VmRSS) after the last. The server is stopped at the end.

For models planned per input value (NonMaxSuppression: torchvision's detectors, from
tools/models/export_detection.py), where every new input is planned; a model planned by shape
alone replays from the second request on. A measurement, not a test.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loopback_server  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("stubs")
    parser.add_argument("model")
    parser.add_argument("input")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--input-name", default="input")
    args = parser.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc

    tmp = tempfile.TemporaryDirectory()
    repo = os.path.join(tmp.name, "repo")
    os.makedirs(os.path.join(repo, "model", "1"))
    os.symlink(os.path.abspath(args.model), os.path.join(repo, "model", "1", "model.onnx"))
    config = os.path.join(tmp.name, "server.yaml")
    with open(config, "w") as f:
        f.write(f"runtime: {{streams_per_device: 1, intra_op_threads: {args.threads}}}\n")
    proc, port = loopback_server.start(args.server, config, repo,
                                       os.path.join(tmp.name, "server.log"), args.threads)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                        options=[("grpc.max_receive_message_length", 256 << 20)])
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        while not stub.ModelReady(pb.ModelReadyRequest(name="model"), timeout=120).ready:
            time.sleep(0.2)
        x = np.load(args.input).astype(np.float32)
        rng = np.random.default_rng(0)
        times = []
        for i in range(args.requests):
            xi = x if i == 0 else (x + rng.normal(0, 0.01, x.shape)).astype(np.float32)
            request = pb.ModelInferRequest(model_name="model")
            request.inputs.add(name=args.input_name, datatype="FP32", shape=list(x.shape))
            request.raw_input_contents.append(xi.tobytes())
            start = time.monotonic()
            stub.ModelInfer(request, timeout=600)
            times.append(time.monotonic() - start)
        rss_mb = loopback_server.rss_bytes(proc.pid) >> 20
        channel.close()
        print(f"{args.model}: {args.threads} threads, request s: "
              + " ".join(f"{t:.3f}" for t in times) + f"; server VmRSS after: {rss_mb} MB")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
