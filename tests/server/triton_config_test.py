#!/usr/bin/python3
"""Triton drop-in, model configuration side: the real reprise-server over a repository of
config.pbtxt files, Triton's auto-complete, statistics counts, poll mode and Triton's flags,
driven by Python's gRPC client with the generated stubs.

usage: triton_config_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

Every model is made here: x [N,4] FP32 -> y = x + 1 (N symbolic, so Triton's auto-complete
would batch it).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc
import numpy as np
import onnx
from onnx import TensorProto, helper

SERVER, STUBS = sys.argv[1:3]
sys.path.insert(0, STUBS)
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import reprise_admin_pb2 as admin_pb  # noqa: E402
import reprise_admin_pb2_grpc as admin_grpc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_log import read_until_started  # noqa: E402

WAIT_S = 60  # the longest any wait for the server may take before the test fails


def write_model(repo, name, version=1, config=None, config_name="config.pbtxt"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    one = helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], name, [x], [y],
                              [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(os.path.join(repo, name, str(version)), exist_ok=True)
    onnx.save(model, os.path.join(repo, name, str(version), "model.onnx"))
    if config is not None:
        with open(os.path.join(repo, name, config_name), "w") as f:
            f.write(config)


def request(model, rows, version=""):
    x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    r = pb.ModelInferRequest(model_name=model, model_version=version)
    r.inputs.add(name="x", datatype="FP32", shape=[rows, 4])
    r.raw_input_contents.append(x.tobytes())
    return r, x


def wait_until(what, predicate):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


class Daemon:
    """reprise-server on 127.0.0.1 with a free port over `repo`."""

    def __init__(self, test, repo, extra, wait_ready=True):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [SERVER, "--model-repository", repo, "--grpc-address=127.0.0.1", "--grpc-port=0",
             "--metrics-port=0", "--http-port=0", "--strict-readiness=false"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)
        self.log, port, _ = read_until_started(self.proc, WAIT_S)
        test.assertIsNotNone(port, "server did not start: " + self.log.decode(errors="replace"))
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        grpc.channel_ready_future(self.channel).result(timeout=WAIT_S)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.admin = admin_grpc.RuntimeInstancesStub(self.channel)
        if wait_ready:
            wait_until("readiness",
                       lambda: self.stub.ServerReady(pb.ServerReadyRequest()).ready)

    def config(self, name):
        return self.stub.ModelConfig(pb.ModelConfigRequest(name=name)).config

    def stats(self, name):
        return self.stub.ModelStatistics(pb.ModelStatisticsRequest(name=name)).model_stats[0]

    def index(self):
        return self.stub.RepositoryIndex(pb.RepositoryIndexRequest()).models

    def ready(self, name, version=""):
        try:
            return self.stub.ModelReady(pb.ModelReadyRequest(name=name, version=version)).ready
        except grpc.RpcError:
            return False

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()


class TritonConfigTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = self.tmp.name
        self.daemon = None

    def tearDown(self):
        if self.daemon is not None:
            self.daemon.stop()
        self.tmp.cleanup()

    def start(self, extra=(), wait_ready=True):
        self.daemon = Daemon(self, self.repo, list(extra), wait_ready)
        return self.daemon

    def test_pbtxt_repository_batching_and_instances_honoured(self):
        write_model(self.repo, "batched", config="""
name: "batched"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching {
  preferred_batch_size: [ 4 ]
  max_queue_delay_microseconds: 30000000
}
instance_group [ { count: 1 kind: KIND_CPU } ]
""")
        write_model(self.repo, "three", config="""
backend: "onnxruntime"
max_batch_size: 2
instance_group [ { count: 3 kind: KIND_CPU } ]
capture { buckets: [ 1 ] warmup: true }
""")
        write_model(self.repo, "refused", config="""
max_batch_size: 4

sequence_batching { max_sequence_idle_microseconds: 5000000
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START } ] } ] }
""")
        write_model(self.repo, "both", config="max_batch_size: 2\n")
        with open(os.path.join(self.repo, "both", "config.yaml"), "w") as f:
            f.write("max_batch_size: 2\n")
        d = self.start()

        config = d.config("batched")
        self.assertEqual(config.max_batch_size, 4)
        self.assertEqual(list(config.dynamic_batching.preferred_batch_size), [4])
        self.assertEqual(config.dynamic_batching.max_queue_delay_microseconds, 30000000)
        self.assertEqual(config.platform, "onnxruntime_onnx")
        self.assertEqual(config.backend, "onnxruntime")
        # Behaviour: four single-row requests wait (up to 30 s) until four are queued, then run
        # as one execution of batch 4.
        results = [None] * 4

        def send(i):
            r, x = request("batched", 1)
            out = d.stub.ModelInfer(r, timeout=WAIT_S)
            results[i] = (np.frombuffer(out.raw_output_contents[0], np.float32), x)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for got, x in results:
            np.testing.assert_array_equal(got, (x + 1).ravel())
        stats = d.stats("batched")
        self.assertEqual(stats.inference_count, 4)
        self.assertEqual(stats.execution_count, 1)
        self.assertEqual([(b.batch_size, b.compute_infer.count) for b in stats.batch_stats],
                         [(4, 1)])

        config = d.config("three")
        self.assertEqual([g.count for g in config.instance_group], [3])
        self.assertEqual(config.max_batch_size, 2)
        # Behaviour: the warm-up captured bucket 1 on each of the three streams.
        listed = d.admin.ListInstances(admin_pb.ListInstancesRequest(model="three"))
        self.assertEqual(sorted({i.stream for i in listed.instances}), [0, 1, 2])

        reasons = {m.name: m.reason for m in d.index()}
        self.assertRegex(reasons["refused"],
                         r'refused/config\.pbtxt line 4: field "sequence_batching": is a Triton '
                         r'feature that Reprise does not implement')
        self.assertIn("both config.pbtxt and config.yaml", reasons["both"])
        self.assertFalse(d.ready("refused"))

    def test_auto_complete(self):
        write_model(self.repo, "auto")
        d = self.start()
        config = d.config("auto")
        self.assertEqual(config.max_batch_size, 4)
        self.assertTrue(config.HasField("dynamic_batching"))
        self.assertEqual([(t.name, list(t.dims)) for t in config.input], [("x", [4])])
        self.assertEqual([(t.name, list(t.dims)) for t in config.output], [("y", [4])])
        self.assertEqual(config.input[0].data_type, 11)  # TYPE_FP32
        # A batch-4 request: four inferences in one execution (Triton's counting).
        r, x = request("auto", 4)
        out = d.stub.ModelInfer(r, timeout=WAIT_S)
        np.testing.assert_array_equal(
            np.frombuffer(out.raw_output_contents[0], np.float32).reshape(4, 4), x + 1)
        stats = d.stats("auto")
        self.assertEqual(stats.inference_count, 4)
        self.assertEqual(stats.execution_count, 1)
        self.assertEqual(stats.inference_stats.success.count, 1)  # one request
        # Above the completed max_batch_size: refused.
        with self.assertRaises(grpc.RpcError) as e:
            d.stub.ModelInfer(request("auto", 5)[0], timeout=WAIT_S)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_auto_complete_flags(self):
        write_model(self.repo, "auto")
        d = self.start(["--backend-config", "onnxruntime,default-max-batch-size=8"])
        self.assertEqual(d.config("auto").max_batch_size, 8)
        d.stop()
        d = self.daemon = self.start(["--disable-auto-complete-config"])
        config = d.config("auto")
        self.assertEqual(config.max_batch_size, 0)
        self.assertFalse(config.HasField("dynamic_batching"))
        d.stub.ModelInfer(request("auto", 4)[0], timeout=WAIT_S)
        stats = d.stats("auto")
        self.assertEqual((stats.inference_count, stats.execution_count), (1, 1))

    def test_poll_mode_picks_up_new_and_removed_versions(self):
        write_model(self.repo, "polled", config="version_policy { latest { num_versions: 1 } }\n")
        d = self.start(["--model-control-mode=poll", "--repository-poll-secs", "1"])
        self.assertTrue(d.ready("polled", "1"))
        # Explicit loads are refused while polling, as in Triton.
        with self.assertRaises(grpc.RpcError) as e:
            d.stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="polled"))
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        # A new version: loaded, and the old one retired (latest 1).
        write_model(self.repo, "polled", version=2)
        wait_until("version 2", lambda: d.ready("polled", "2"))
        wait_until("version 1 to go", lambda: not d.ready("polled", "1"))
        out = d.stub.ModelInfer(request("polled", 1)[0], timeout=WAIT_S)
        self.assertEqual(out.model_version, "2")
        # The version removed: version 1 serves again.
        shutil.rmtree(os.path.join(self.repo, "polled", "2"))
        wait_until("version 1 back", lambda: d.ready("polled", "1"))
        wait_until("version 2 to go", lambda: not d.ready("polled", "2"))
        # A new model appears, then goes.
        write_model(self.repo, "late")
        wait_until("model late", lambda: d.ready("late"))
        shutil.rmtree(os.path.join(self.repo, "late"))
        wait_until("model late to go", lambda: not d.ready("late"))
        self.assertTrue(d.ready("polled", "1"))

    def test_log_flags(self):
        write_model(self.repo, "auto")
        log_file = os.path.join(self.repo, "server.log")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [SERVER, "--model-repository", self.repo, "--grpc-address", "127.0.0.1",
             "--grpc-port", str(port), "--allow-metrics=false", "--http-port=0", "--log-format", "ISO8601",
             "--log-file", log_file, "--log-verbose", "1", "--log-info=true"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            channel = grpc.insecure_channel("127.0.0.1:%d" % port)
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            wait_until("readiness", lambda: self._ready(stub))
            channel.close()
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=WAIT_S)
        self.assertEqual(proc.returncode, 0)
        with open(log_file) as f:
            lines = f.read().splitlines()
        self.assertTrue(any("Started GRPCInferenceService" in line for line in lines), lines)
        for line in lines:
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [TDIWEC] \d+\] ")
        # --log-verbose 1 is the debug level.
        self.assertTrue(any(re.search(r" log\.level=debug ", line) for line in lines), lines)
        self.assertNotIn(b"Started GRPCInferenceService", out)  # the log went to the file

    def test_exit_on_error(self):
        os.makedirs(os.path.join(self.repo, "broken", "1"))
        with open(os.path.join(self.repo, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"not a model")
        proc = subprocess.run(
            [SERVER, "--model-repository", self.repo, "--grpc-address=127.0.0.1",
             "--grpc-port=0", "--allow-metrics=false", "--http-port=0", "--exit-on-error=true"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=WAIT_S)
        self.assertEqual(proc.returncode, 1, proc.stdout.decode(errors="replace"))
        self.assertIn(b"exiting (--exit-on-error)", proc.stdout)

    @staticmethod
    def _ready(stub):
        try:
            return stub.ServerReady(pb.ServerReadyRequest(), timeout=1).ready
        except grpc.RpcError:
            return False


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)
