#!/usr/bin/python3
"""Starts the real reprise-server binary on loopback and drives it with Python's gRPC client.

usage: daemon_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

Checks: the flags, health (grpc.health.v1), reflection, the core RPCs, that a model the build
cannot serve is listed UNAVAILABLE with its reason (no engine is linked yet), that a bad flag
exits 2, and that SIGTERM shuts the daemon down with exit status 0.
"""
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

SERVER = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402

STARTED = re.compile(rb"Started GRPCInferenceService at [^:]+:(\d+)")


class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.TemporaryDirectory()
        os.makedirs(os.path.join(self.repo.name, "resnet", "1"))
        with open(os.path.join(self.repo.name, "resnet", "1", "model.onnx"), "wb") as f:
            f.write(b"placeholder")
        self.proc = subprocess.Popen(
            [SERVER, "--model-repository", self.repo.name, "--grpc-address=127.0.0.1",
             "--grpc-port=0", "--exit-timeout-secs", "5"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.log = b""
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.log += line
                m = STARTED.search(line)
                if m:
                    port = int(m.group(1))
        self.assertIsNotNone(port, "server did not start: " + self.log.decode(errors="replace"))
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)

    def tearDown(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.repo.cleanup()

    def wait_ready(self):
        deadline = time.monotonic() + 30
        while not self.stub.ServerReady(pb.ServerReadyRequest()).ready:
            self.assertLess(time.monotonic(), deadline, "server never became ready")

    def test_serves_protocol_and_stops_on_sigterm(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.wait_ready()
        meta = self.stub.ServerMetadata(pb.ServerMetadataRequest())
        self.assertEqual(meta.name, "reprise")

        health = health_pb2_grpc.HealthStub(self.channel)
        status = health.Check(health_pb2.HealthCheckRequest()).status
        self.assertEqual(status, health_pb2.HealthCheckResponse.SERVING)

        # No engine is linked: the model is listed, unavailable, with the reason.
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        rows = [(m.name, m.version, m.state, m.reason) for m in index.models]
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0][:3], ("resnet", "1", "UNAVAILABLE"))
        self.assertIn("no inference engine", rows[0][3])
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="resnet")).ready)
        with self.assertRaises(grpc.RpcError) as err:
            self.stub.ModelInfer(pb.ModelInferRequest(model_name="resnet"))
        self.assertEqual(err.exception.code(), grpc.StatusCode.NOT_FOUND)
        # Model control mode none: explicit loads are refused.
        with self.assertRaises(grpc.RpcError) as err:
            self.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="resnet"))
        self.assertEqual(err.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

        # Reflection: list_services (field 7 of ServerReflectionRequest, an empty string).
        reflect = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        answer = b"".join(reflect(iter([b"\x3a\x00"])))
        for service in (b"inference.GRPCInferenceService", b"grpc.health.v1.Health",
                        b"reprise.v1.RuntimeInstances"):
            self.assertIn(service, answer)

        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)
        self.log += self.proc.stdout.read()
        self.assertIn(b"shutdown complete", self.log)


class BadFlagTest(unittest.TestCase):
    def test_unknown_flag_exits_2(self):
        result = subprocess.run([SERVER, "--grpc-prot=1"], capture_output=True, timeout=30)
        self.assertEqual(result.returncode, 2)
        self.assertIn(b"unknown flag --grpc-prot", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
