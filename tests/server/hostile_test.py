#!/usr/bin/python3
"""Hostile requests against the real reprise-server on loopback (issue "hostile input").

usage: hostile_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

Each case sends what an attacker would and asserts the status code and the message, then that
the server still answers a good request. Under the asan preset the same binary runs with
AddressSanitizer and UndefinedBehaviorSanitizer, so an out-of-bounds read or an overflow in the
server fails the run (the sanitizer report ends the process, and the next request fails).

The repository is made here:
- reduce: no batch axis, x[a, b] float -> ReduceSum over axis 0 -> y[b];
- gather: max_batch_size 8 with dynamic batching, idx[batch, n] int64 -> Gather from a 10x4
  table -> out[batch, n, 4];
- outer: x[n] float -> the outer product x x^T [n, n] (a small request whose plan is large).
"""
import os
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_log import read_until_started  # noqa: E402

TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)
# Small limits so that the cases stay cheap; the defaults are documented in config/README.md.
MAX_REQUEST_BYTES = 1 << 20
MAX_PLAN_BYTES = 16 << 20
# The models without a config are written for configs used as written (no batch dimension):
# auto-complete is off here (it is covered by triton_config_test.py).
SERVER_CONFIG = f"""
repository: {{auto_complete_config: false}}
runtime: {{cpu_threads: 8}}
limits:
  max_request_bytes: {MAX_REQUEST_BYTES}
  max_plan_bytes: {MAX_PLAN_BYTES}
"""


def save(model, repo, name, config=None):
    model.ir_version = 8
    os.makedirs(os.path.join(repo, name, "1"))
    onnx.save(model, os.path.join(repo, name, "1", "model.onnx"))
    if config:
        with open(os.path.join(repo, name, "config.yaml"), "w") as f:
            f.write(config)


def opset17(graph):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def write_repository(repo):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b"])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    save(opset17(helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "reduce", [x], [y],
        [axes])), repo, "reduce")

    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", "n"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "n", 4])
    table = helper.make_tensor("table", TensorProto.FLOAT, [10, 4], TABLE.tobytes(), raw=True)
    save(opset17(helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["out"], axis=0)], "gather", [idx], [out],
        [table])), repo, "gather",
        "max_batch_size: 8\n"
        "instance_group: [{count: 1, kind: KIND_CPU}]\n"
        "dynamic_batching: {preferred_batch_size: [4], max_queue_delay_microseconds: 2000000}\n")

    v = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    o = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "n"])
    col = helper.make_tensor("col", TensorProto.INT64, [2], [-1, 1])
    row = helper.make_tensor("row", TensorProto.INT64, [2], [1, -1])
    save(opset17(helper.make_graph(
        [helper.make_node("Reshape", ["x", "col"], ["c"]),
         helper.make_node("Reshape", ["x", "row"], ["r"]),
         helper.make_node("MatMul", ["c", "r"], ["y"])], "outer", [v], [o], [col, row])),
        repo, "outer")


class Daemon:
    def __init__(self, repo, config_path, extra=()):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [SERVER, "--config", config_path, "--model-repository", repo,
             "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0", "--metrics-port=0",
             "--exit-timeout-secs", "10"] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)
        self.log, self.port, self.metrics_port = read_until_started(self.proc, 60)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("reprise-server did not start:\n" + self.log.decode(errors="replace"))
        # Keep reading the log so that the server never blocks on a full pipe.
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{self.port}",
            options=[("grpc.max_send_message_length", 64 << 20),
                     ("grpc.max_receive_message_length", 64 << 20)])
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        # The port opens before the startup loads finish: wait for readiness.
        deadline = time.monotonic() + 120
        while not self.stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.proc.kill()
                raise RuntimeError("reprise-server never became ready:\n" +
                                   self.log.decode(errors="replace"))
            time.sleep(0.1)

    def _drain(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.log += line

    def stop(self):
        self.channel.close()
        self.proc.send_signal(15)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(timeout=5)
        return code


def request(model, name, datatype, shape, raw=b""):
    r = pb.ModelInferRequest(model_name=model)
    r.inputs.add(name=name, datatype=datatype, shape=shape)
    r.raw_input_contents.append(raw)
    return r


class DaemonTestCase(unittest.TestCase):
    """One server for the whole class: the repository that `repository(repo)` writes, the config
    `server_config`, the flags `daemon_args`. Stopped after the class, and its log checked for
    sanitizer reports. Also used by string_tensor_test.py."""
    server_config = ""
    daemon_args = []

    @staticmethod
    def repository(repo):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        repo = os.path.join(cls.tmp.name, "repo")
        os.makedirs(repo)
        cls.repository(repo)
        config = os.path.join(cls.tmp.name, "server.yaml")
        with open(config, "w") as f:
            f.write(cls.server_config)
        cls.daemon = Daemon(repo, config, cls.daemon_args)

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        log = cls.daemon.log.decode(errors="replace")
        cls.tmp.cleanup()
        if "ERROR: AddressSanitizer" in log or "runtime error:" in log or code != 0:
            raise AssertionError(f"reprise-server exited {code}:\n{log[-6000:]}")

    def infer(self, r, timeout=60):
        return self.daemon.stub.ModelInfer(r, timeout=timeout)

    def refused(self, r, code, *fragments):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.infer(r)
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, ctx.exception.details())
        return ctx.exception.details()


class HostileRequestTest(DaemonTestCase):
    repository = staticmethod(write_repository)
    server_config = SERVER_CONFIG
    daemon_args = ["--model-control-mode", "explicit", "--load-model", "reduce",
                   "--load-model", "gather", "--load-model", "outer"]

    def assert_serving(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        response = self.infer(request("reduce", "x", "FP32", [2, 3], x.tobytes()))
        np.testing.assert_array_equal(
            np.frombuffer(response.raw_output_contents[0], np.float32), x.sum(axis=0))
        idx = np.array([[1, 2]], np.int64)
        response = self.infer(request("gather", "idx", "INT64", [1, 2], idx.tobytes()))
        np.testing.assert_array_equal(
            np.frombuffer(response.raw_output_contents[0], np.float32).reshape(1, 2, 4), TABLE[idx])
        self.assertIsNone(self.daemon.proc.poll(), "the server exited")

    def tearDown(self):
        self.assert_serving()

    # The two reproductions of the issue.
    def test_zero_dimension_does_not_hide_a_huge_one(self):
        self.refused(request("reduce", "x", "FP32", [0, 549755813888]),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_tensor_elements",
                     "[0,549755813888]")

    def test_wrapping_byte_size_is_refused_before_batching(self):
        self.refused(request("gather", "idx", "INT64", [0, 1 << 61]),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_tensor_elements")
        self.refused(request("gather", "idx", "INT64", [1, 1 << 61]),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_tensor_elements")

    def test_zero_rows_on_a_batched_model(self):
        self.refused(request("gather", "idx", "INT64", [0, 3]), grpc.StatusCode.INVALID_ARGUMENT,
                     "batch size 0", "at least one row")

    def test_zero_sized_tensor_without_batch_axis_is_served(self):
        response = self.infer(request("reduce", "x", "FP32", [0, 5]))
        self.assertEqual(list(response.outputs[0].shape), [5])
        np.testing.assert_array_equal(
            np.frombuffer(response.raw_output_contents[0], np.float32), np.zeros(5, np.float32))

    def test_negative_dimension(self):
        self.refused(request("reduce", "x", "FP32", [-1, 4]), grpc.StatusCode.INVALID_ARGUMENT,
                     "negative dimension -1")
        self.refused(request("reduce", "x", "FP32", [2, -(1 << 62)]),
                     grpc.StatusCode.INVALID_ARGUMENT, "negative dimension")

    def test_overflowing_shapes(self):
        for shape in ([1 << 62, 4], [1 << 31, 1 << 31], [(1 << 63) - 1, (1 << 63) - 1],
                      [65536, 65536]):
            self.refused(request("reduce", "x", "FP32", shape),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_tensor_elements")

    def test_rank_over_the_limit(self):
        self.refused(request("reduce", "x", "FP32", [1] * 40), grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "limits.max_tensor_rank")

    def test_wrong_byte_count_for_a_legal_shape(self):
        self.refused(request("reduce", "x", "FP32", [2, 3], b"\0" * 20),
                     grpc.StatusCode.INVALID_ARGUMENT, "20 bytes of data, expected 24")

    def test_request_bytes_over_the_limit(self):
        n = MAX_REQUEST_BYTES // 4 + 16
        self.refused(request("reduce", "x", "FP32", [1, n], b"\0" * (4 * n)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_request_bytes")

    def test_plan_over_the_cap(self):
        # 16 KiB in, 64 MiB out: the plan is refused before anything is allocated for it.
        n = 4096
        self.refused(request("outer", "x", "FP32", [n], b"\0" * (4 * n)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_plan_bytes")
        response = self.infer(request("outer", "x", "FP32", [3],
                                      np.array([1, 2, 3], np.float32).tobytes()))
        self.assertEqual(list(response.outputs[0].shape), [3, 3])

    def test_huge_names_are_cut_short_in_errors(self):
        name = "m" * (1 << 20)
        details = self.refused(request(name, "x", "FP32", [1, 1], b"\0" * 4),
                               grpc.StatusCode.NOT_FOUND, "(1048576 bytes)")
        self.assertLess(len(details), 1000)
        details = self.refused(request("reduce", name, "FP32", [1, 1], b"\0" * 4),
                               grpc.StatusCode.INVALID_ARGUMENT, "unexpected input",
                               "(1048576 bytes)")
        self.assertLess(len(details), 1000)
        r = request("reduce", "x", "FP32", [1, 1], b"\0" * 4)
        r.outputs.add(name=name)
        details = self.refused(r, grpc.StatusCode.INVALID_ARGUMENT, "(1048576 bytes)")
        self.assertLess(len(details), 1000)

    def test_far_deadline(self):
        x = np.ones((1, 2), np.float32)
        # About 95 years (what Python's client can send); the C++ engine batching test covers
        # deadlines past int64 nanoseconds.
        response = self.infer(request("reduce", "x", "FP32", [1, 2], x.tobytes()),
                              timeout=3e9)
        np.testing.assert_array_equal(
            np.frombuffer(response.raw_output_contents[0], np.float32), [1, 1])

    def test_failing_request_inside_a_batch(self):
        # Four concurrent requests of one shape form one batch (preferred size 4, long delay).
        # The third indexes outside the table: only it fails, with only its own error.
        self.run_batch_with_a_failing_request(bad_at=2, bad_first=False)

    def test_failing_request_first_in_a_batch(self):
        # The failing request reaches the batch first (sent 0.3 s before the others): the batch's
        # one execution is still counted, with a request that succeeded.
        self.run_batch_with_a_failing_request(bad_at=0, bad_first=True)

    def run_batch_with_a_failing_request(self, bad_at, bad_first):
        good = [np.array([[i % 10, (i + 3) % 10]], np.int64) for i in range(4)]
        bad = np.array([[7, 101]], np.int64)
        inputs = list(good)
        inputs[bad_at] = bad
        results = [None] * 4

        def call(i):
            try:
                results[i] = self.infer(request("gather", "idx", "INT64", [1, 2],
                                                inputs[i].tobytes()))
            except grpc.RpcError as e:
                results[i] = e

        before = self.statistics("gather")
        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        if bad_first:
            threads[bad_at].start()
            time.sleep(0.3)
        for i, t in enumerate(threads):
            if not (bad_first and i == bad_at):
                t.start()
        for t in threads:
            t.join()
        for i in range(4):
            if i == bad_at:
                continue
            self.assertNotIsInstance(results[i], grpc.RpcError,
                                     getattr(results[i], "details", lambda: "")())
            np.testing.assert_array_equal(
                np.frombuffer(results[i].raw_output_contents[0], np.float32).reshape(1, 2, 4),
                TABLE[inputs[i]])
        self.assertIsInstance(results[bad_at], grpc.RpcError)
        self.assertEqual(results[bad_at].code(), grpc.StatusCode.INVALID_ARGUMENT,
                         results[bad_at].details())
        self.assertIn("index 101 is out of range", results[bad_at].details())
        # They ran as one batch (one execution, not four): the isolation is what saved the
        # three good ones.
        after = self.statistics("gather")
        self.assertEqual(after.execution_count - before.execution_count, 1)
        self.assertEqual(after.inference_count - before.inference_count, 3)

    def statistics(self, model):
        stats = self.daemon.stub.ModelStatistics(pb.ModelStatisticsRequest(name=model))
        return stats.model_stats[0]

    def test_made_up_model_names_leave_no_state(self):
        for i in range(100):
            with self.assertRaises(grpc.RpcError) as ctx:
                self.daemon.stub.RepositoryModelLoad(
                    pb.RepositoryModelLoadRequest(model_name=f"nosuch{i}"), timeout=30)
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
        index = self.daemon.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        names = {m.name for m in index.models}
        self.assertEqual(names, {"reduce", "gather", "outer"})
        import urllib.request
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{self.daemon.metrics_port}/metrics", timeout=30).read().decode()
        self.assertNotIn("nosuch", text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
