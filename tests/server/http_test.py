#!/usr/bin/python3
"""The KServe v2 HTTP/REST endpoint against the real reprise-server on loopback (issue 19).

usage: http_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

Every route; JSON and binary inference whose results are byte-equal to gRPC's; request and
response compression; each malformed request with its status code, after which the server
still serves (tearDown); statistics that count HTTP requests; the HTTP restricted API.

The repository is made here: reduce (x[a, b] FP32 -> ReduceSum over axis 0 -> y[b]) and gather
(idx[batch, n] INT64 -> rows of a 10x4 FP32 table, max_batch_size 8).
"""
import gzip
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import time
import unittest
import zlib
from multiprocessing import shared_memory

import numpy as np
from onnx import TensorProto, helper

SERVER, STUBS = sys.argv[1:3]
sys.path.insert(0, STUBS)
import grpc_service_pb2 as pb  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_test import Daemon, request, save  # noqa: E402  (the same start, models, requests)

TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)
MAX_REQUEST_BYTES = 1 << 20
BODY_LIMIT = MAX_REQUEST_BYTES + (1 << 20)  # limits.max_message_bytes, derived
SECRET = "s3cret"
STARTED_HTTP = re.compile(rb"Started HTTPService at [^:]+:(\d+)")


def write_repository(repo):
    opset = [helper.make_opsetid("", 17)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b"])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    save(helper.make_model(helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "reduce", [x], [y],
        [axes]), opset_imports=opset), repo, "reduce")
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", "n"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "n", 4])
    table = helper.make_tensor("table", TensorProto.FLOAT, [10, 4], TABLE.tobytes(), raw=True)
    save(helper.make_model(helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["out"], axis=0)], "gather", [idx], [out],
        [table]), opset_imports=opset), repo, "gather", "max_batch_size: 8\n")


def start_daemon(repo, config_path, extra):
    """hostile_test's Daemon (gRPC port, readiness), plus the HTTP port from its log."""
    # The models are written for configs used as written (no batch dimension unless a config
    # says so), as in hostile_test.py: auto-complete is off.
    daemon = Daemon(repo, config_path, ["--disable-auto-complete-config"] + list(extra))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = STARTED_HTTP.search(daemon.log)
        if m:
            daemon.http_port = int(m.group(1))
            return daemon
        time.sleep(0.05)
    daemon.stop()
    raise RuntimeError("no HTTP port in the log:\n" + daemon.log.decode(errors="replace"))


class HttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        repo = os.path.join(cls.tmp.name, "repo")
        os.makedirs(repo)
        write_repository(repo)
        config = os.path.join(cls.tmp.name, "server.yaml")
        with open(config, "w") as f:
            f.write(f"runtime: {{cpu_threads: 4}}\n"
                    f"limits: {{max_request_bytes: {MAX_REQUEST_BYTES}}}\n")
        cls.daemon = start_daemon(repo, config, [
            "--model-control-mode", "explicit", "--load-model", "reduce", "--load-model", "gather",
            f"--http-restricted-api=model-repository:admin-key={SECRET}"])
        cls.port = cls.daemon.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        log = cls.daemon.log.decode(errors="replace")
        cls.tmp.cleanup()
        if "ERROR: AddressSanitizer" in log or "runtime error:" in log or code != 0:
            raise AssertionError(f"reprise-server exited {code}:\n{log[-6000:]}")

    def call(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            conn.close()

    def error(self, status, method, path, body=None, headers=None, fragment=None):
        got, hdrs, data = self.call(method, path, body, headers)
        self.assertEqual(got, status, data)
        message = json.loads(data)["error"]
        if fragment:
            self.assertIn(fragment, message)
        return message

    def raw_exchange(self, data, shut_write=False):
        """Sends `data` on a fresh socket; returns everything the server sent back."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        try:
            s.sendall(data)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out
                out += chunk
        finally:
            s.close()

    def reduce_json(self, x):
        return json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                       "data": x.flatten().tolist()}]})

    def assert_serving(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        status, _, data = self.call("POST", "/v2/models/reduce/infer", self.reduce_json(x))
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["outputs"][0]["data"], x.sum(axis=0).tolist())
        self.assertIsNone(self.daemon.proc.poll(), "the server exited")

    def tearDown(self):
        self.assert_serving()

    # ---- routes ----

    def test_health_and_metadata(self):
        self.assertEqual(self.call("GET", "/v2/health/live")[0], 200)
        self.assertEqual(self.call("GET", "/v2/health/ready")[0], 200)
        self.assertEqual(self.call("GET", "/v2/models/reduce/ready")[0], 200)
        self.assertEqual(self.call("GET", "/v2/models/reduce/versions/1/ready")[0], 200)
        self.assertEqual(self.call("GET", "/v2/models/reduce/versions/7/ready")[0], 400)
        self.assertEqual(self.call("GET", "/v2/models/nothere/ready")[0], 400)
        status, _, data = self.call("GET", "/v2")
        self.assertEqual(status, 200)
        server = json.loads(data)
        self.assertEqual(server["name"], "reprise")
        self.assertIn("model_repository", server["extensions"])
        status, _, data = self.call("GET", "/v2/models/gather/versions/1")
        self.assertEqual(status, 200)
        meta = json.loads(data)
        grpc_meta = self.daemon.stub.ModelMetadata(pb.ModelMetadataRequest(name="gather"))
        self.assertEqual(meta["name"], "gather")
        self.assertEqual(meta["versions"], list(grpc_meta.versions))
        self.assertEqual(meta["inputs"][0],
                         {"name": "idx", "datatype": "INT64", "shape": list(grpc_meta.inputs[0].shape)})
        self.error(404, "GET", "/v2/models/nothere", fragment="nothere")

    def test_config_and_statistics(self):
        status, _, data = self.call("GET", "/v2/models/gather/config")
        self.assertEqual(status, 200)
        config = json.loads(data)
        self.assertEqual(config["name"], "gather")
        self.assertEqual(config["max_batch_size"], 8)
        before = json.loads(self.call("GET", "/v2/models/reduce/stats")[2])["model_stats"][0]
        for _ in range(3):
            self.assert_serving()
        self.error(400, "POST", "/v2/models/reduce/infer",
                   json.dumps({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP64",
                                           "data": [1.0]}]}), fragment="FP64")
        after = json.loads(self.call("GET", "/v2/models/reduce/versions/1/stats")[2])["model_stats"][0]
        stats, old = after["inference_stats"], before["inference_stats"]
        self.assertEqual(stats["success"]["count"] - old["success"]["count"], 3)
        self.assertEqual(stats["fail"]["count"] - old["fail"]["count"], 1)
        self.assertEqual(after["inference_count"] - before["inference_count"], 3)
        # The same numbers over gRPC: one set of statistics for both protocols.
        grpc_stats = self.daemon.stub.ModelStatistics(
            pb.ModelStatisticsRequest(name="reduce")).model_stats[0]
        self.assertEqual(grpc_stats.inference_stats.fail.count, stats["fail"]["count"])
        everything = json.loads(self.call("GET", "/v2/models/stats")[2])["model_stats"]
        self.assertEqual(sorted(m["name"] for m in everything), ["gather", "reduce"])
        self.error(404, "GET", "/v2/models/nothere/stats")

    def test_repository_routes_and_restricted_api(self):
        message = self.error(403, "POST", "/v2/repository/index", "{}", fragment="admin-key")
        self.assertIn("restricted", message)
        self.error(403, "POST", "/v2/repository/index", "{}", {"Admin-Key": "wrong"})
        key = {"Admin-Key": SECRET}
        status, _, data = self.call("POST", "/v2/repository/index", "", key)
        self.assertEqual(status, 200, data)
        index = {m["name"]: m["state"] for m in json.loads(data)}
        self.assertEqual(index, {"gather": "READY", "reduce": "READY"})
        self.assertEqual(self.call("POST", "/v2/repository/models/gather/unload", "", key)[0], 200)
        self.assertEqual(self.call("GET", "/v2/models/gather/ready")[0], 400)
        ready = json.loads(self.call("POST", "/v2/repository/index", '{"ready": true}', key)[2])
        self.assertEqual([m["name"] for m in ready], ["reduce"])
        self.assertEqual(self.call("POST", "/v2/repository/models/gather/load", "{}", key)[0], 200)
        self.assertEqual(self.call("GET", "/v2/models/gather/ready")[0], 200)
        self.error(404, "POST", "/v2/repository/models/nothere/load", "", key)
        # Load parameters reach the service: a malformed config override is refused as gRPC
        # refuses it, a valid one is applied.
        self.error(400, "POST", "/v2/repository/models/gather/load",
                   json.dumps({"parameters": {"config": "{not json"}}), key,
                   fragment="failed to load")
        self.assertEqual(self.call("GET", "/v2/models/gather/ready")[0], 200)
        override = json.dumps({"max_batch_size": 2})  # the repository says 8
        status, _, data = self.call("POST", "/v2/repository/models/gather/load",
                                    json.dumps({"parameters": {"config": override}}), key)
        self.assertEqual(status, 200, data)
        config = json.loads(self.call("GET", "/v2/models/gather/config")[2])
        self.assertEqual(config["max_batch_size"], 2)
        # A load without parameters reads the repository again.
        self.assertEqual(self.call("POST", "/v2/repository/models/gather/load", "{}", key)[0], 200)
        config = json.loads(self.call("GET", "/v2/models/gather/config")[2])
        self.assertEqual(config["max_batch_size"], 8)
        # Shared memory: routed to the gRPC service (no region registered here).
        status, _, data = self.call("GET", "/v2/systemsharedmemory/status")
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data), [])
        self.error(404, "POST", "/v2/systemsharedmemory/region/r/register",
                   json.dumps({"key": "/reprise-no-such-key", "offset": 0, "byte_size": 64}),
                   fragment="unable to open shared memory region")

    def test_system_shared_memory_inference(self):
        shm = shared_memory.SharedMemory(create=True, size=4096)
        self.addCleanup(shm.unlink)
        self.addCleanup(shm.close)
        idx = np.array([[1, 2, 9], [0, 0, 3]], np.int64)
        shm.buf[:idx.nbytes] = idx.tobytes()
        status, _, data = self.call("POST", "/v2/systemsharedmemory/region/io/register",
                                    json.dumps({"key": "/" + shm.name, "offset": 0,
                                                "byte_size": 4096}))
        self.assertEqual(status, 200, data)
        self.addCleanup(self.call, "POST", "/v2/systemsharedmemory/unregister")
        status, _, data = self.call("GET", "/v2/systemsharedmemory/region/io/status")
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)[0]["name"], "io")
        region = {"shared_memory_region": "io", "shared_memory_byte_size": idx.nbytes}
        out_region = {"shared_memory_region": "io", "shared_memory_offset": 1024,
                      "shared_memory_byte_size": 1024}
        body = json.dumps({"inputs": [{"name": "idx", "shape": [2, 3], "datatype": "INT64",
                                       "parameters": region}],
                           "outputs": [{"name": "out", "parameters": out_region}]})
        status, _, data = self.call("POST", "/v2/models/gather/infer", body)
        self.assertEqual(status, 200, data)
        out = json.loads(data)["outputs"][0]
        self.assertNotIn("data", out)  # the output went into the region, not the response
        self.assertEqual(out["parameters"]["shared_memory_region"], "io")
        got = np.frombuffer(bytes(shm.buf[1024:1024 + 2 * 3 * 4 * 4]), np.float32)
        np.testing.assert_array_equal(got.reshape(2, 3, 4), TABLE[idx])
        # An offset past the region is refused, as over gRPC.
        bad = dict(region, shared_memory_offset=4096)
        self.error(400, "POST", "/v2/models/gather/infer",
                   json.dumps({"inputs": [{"name": "idx", "shape": [2, 3], "datatype": "INT64",
                                           "parameters": bad}]}))

    # ---- inference ----

    def test_json_and_binary_equal_grpc(self):
        idx = np.array([[1, 2, 9], [0, 0, 3]], np.int64)
        expected = self.daemon.stub.ModelInfer(
            request("gather", "idx", "INT64", [2, 3], idx.tobytes()))
        want = expected.raw_output_contents[0]
        body = json.dumps({"id": "r1", "inputs": [{"name": "idx", "shape": [2, 3],
                                                   "datatype": "INT64", "data": idx.tolist()}]})
        status, hdrs, data = self.call("POST", "/v2/models/gather/infer", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(hdrs["content-type"], "application/json")
        out = json.loads(data)
        self.assertEqual(out["id"], "r1")
        self.assertEqual(out["model_name"], "gather")
        self.assertEqual(out["outputs"][0]["shape"], [2, 3, 4])
        self.assertEqual(np.array(out["outputs"][0]["data"], np.float32).tobytes(), want)
        # Binary input and binary output.
        header = json.dumps({"inputs": [{"name": "idx", "shape": [2, 3], "datatype": "INT64",
                                         "parameters": {"binary_data_size": idx.nbytes}}],
                             "outputs": [{"name": "out", "parameters": {"binary_data": True}}]})
        status, hdrs, data = self.call(
            "POST", "/v2/models/gather/versions/1/infer", header.encode() + idx.tobytes(),
            {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 200, data)
        n = int(hdrs["inference-header-content-length"])
        meta = json.loads(data[:n])
        self.assertEqual(meta["outputs"][0]["parameters"]["binary_data_size"], len(want))
        self.assertEqual(data[n:], want)
        # Request-level binary_data_output with JSON input.
        body = json.dumps({"parameters": {"binary_data_output": True},
                           "inputs": [{"name": "idx", "shape": [2, 3], "datatype": "INT64",
                                       "data": idx.flatten().tolist()}]})
        status, hdrs, data = self.call("POST", "/v2/models/gather/infer", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(data[int(hdrs["inference-header-content-length"]):], want)

    def test_compression(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        body = self.reduce_json(x).encode()
        for encoding, pack in (("gzip", gzip.compress), ("deflate", zlib.compress)):
            status, hdrs, data = self.call(
                "POST", "/v2/models/reduce/infer", pack(body),
                {"Content-Encoding": encoding, "Accept-Encoding": encoding})
            self.assertEqual(status, 200, data)
            self.assertEqual(hdrs["content-encoding"], encoding)
            plain = gzip.decompress(data) if encoding == "gzip" else zlib.decompress(data)
            self.assertEqual(json.loads(plain)["outputs"][0]["data"], x.sum(axis=0).tolist())
        # A zip bomb: 16 KiB that inflates past the body limit.
        bomb = gzip.compress(b" " * (BODY_LIMIT + 4096))
        self.assertLess(len(bomb), 64 << 10)
        self.error(413, "POST", "/v2/models/reduce/infer", bomb, {"Content-Encoding": "gzip"},
                   fragment="limit")
        self.error(400, "POST", "/v2/models/reduce/infer", b"\x1f\x8b not gzip",
                   {"Content-Encoding": "gzip"}, fragment="corrupt")
        self.error(415, "POST", "/v2/models/reduce/infer", body, {"Content-Encoding": "br"})

    # ---- malformed requests ----

    def test_malformed_bodies(self):
        path = "/v2/models/reduce/infer"
        self.error(400, "POST", path, "{not json", fragment="malformed JSON")
        self.error(400, "POST", path, "[1]", fragment="expected an object")
        self.error(400, "POST", path, "[" * 100000, fragment="nested deeper")
        self.error(400, "POST", path, '{"inputs": [], "extra": 1}', fragment="extra")
        tensor = {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, "a"]}
        self.error(400, "POST", path, json.dumps({"inputs": [tensor]}), fragment="a string")
        tensor["data"] = [1]
        self.error(400, "POST", path, json.dumps({"inputs": [tensor]}), fragment="1 elements")
        tensor["data"] = [1, 1e300]
        self.error(400, "POST", path, json.dumps({"inputs": [tensor]}), fragment="out of range")
        gather = {"name": "idx", "shape": [1, 1], "datatype": "INT64", "data": [1.5]}
        self.error(400, "POST", "/v2/models/gather/infer", json.dumps({"inputs": [gather]}),
                   fragment="an integer")
        gather["data"] = [2**63]
        self.error(400, "POST", "/v2/models/gather/infer", json.dumps({"inputs": [gather]}),
                   fragment="out of range")
        gather["data"] = [True]
        self.error(400, "POST", "/v2/models/gather/infer", json.dumps({"inputs": [gather]}))
        # The service's own checks: the wrong datatype for the model, an unknown model.
        gather["data"] = [1]
        gather["datatype"] = "INT32"
        self.error(400, "POST", "/v2/models/gather/infer", json.dumps({"inputs": [gather]}),
                   fragment="INT32")
        self.error(404, "POST", "/v2/models/nothere/infer", json.dumps({"inputs": [gather]}))
        # Tensor data over limits.max_request_bytes.
        big = {"name": "x", "shape": [1, MAX_REQUEST_BYTES // 4 + 1], "datatype": "FP32",
               "parameters": {"binary_data_size": MAX_REQUEST_BYTES + 4}}
        header = json.dumps({"inputs": [big]})
        self.error(429, "POST", path, header.encode() + b"\0" * (MAX_REQUEST_BYTES + 4),
                   {"Inference-Header-Content-Length": str(len(header))},
                   fragment="max_request_bytes")

    def test_binary_header_errors(self):
        path = "/v2/models/reduce/infer"
        header = json.dumps({"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32",
                                         "parameters": {"binary_data_size": 8}}]})
        data = np.ones(2, np.float32).tobytes()
        self.error(400, "POST", path, header.encode() + data,
                   {"Inference-Header-Content-Length": str(len(header) + 100)},
                   fragment="past the end")
        self.error(400, "POST", path, header.encode() + data,
                   {"Inference-Header-Content-Length": "-3"}, fragment="not a decimal")
        self.error(400, "POST", path, header.encode() + data[:4],
                   {"Inference-Header-Content-Length": str(len(header))}, fragment="past the end")
        self.error(400, "POST", path, header.encode() + data + b"xx",
                   {"Inference-Header-Content-Length": str(len(header))}, fragment="not used")
        # binary_data_size without the header: the whole body is JSON.
        self.error(400, "POST", path, header.encode() + data, fragment="malformed JSON")

    def test_transport_errors(self):
        self.error(404, "GET", "/v3/anything")
        self.error(404, "GET", "/v2/models/reduce/explode")
        status, hdrs, _ = self.call("GET", "/v2/models/reduce/infer")
        self.assertEqual(status, 405)
        self.assertEqual(hdrs["allow"], "POST")
        self.assertEqual(self.call("DELETE", "/v2/health/live")[0], 405)
        # A body over the limit is refused from its Content-Length, before it is read.
        reply = self.raw_exchange(b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: %d\r\n\r\n" % (BODY_LIMIT + 1),
                                  shut_write=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply)
        # Content-Length larger than the body the client sends before closing its side.
        reply = self.raw_exchange(b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: 100\r\n\r\n{\"inputs\": []}", shut_write=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)
        reply = self.raw_exchange(b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: ten\r\n\r\n{}", shut_write=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)
        reply = self.raw_exchange(b"GARBAGE\r\n\r\n", shut_write=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)
        # Content-Length shorter than the body: the rest is read as the next request.
        body = self.reduce_json(np.ones((1, 2), np.float32)).encode()
        reply = self.raw_exchange(b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body,
                                  shut_write=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)
        self.assertIn(b"malformed JSON", reply)

    def test_keep_alive_and_pipelining(self):
        body = self.reduce_json(np.ones((2, 2), np.float32)).encode()
        one = (b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
               % len(body) + body)
        last = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        reply = self.raw_exchange(one * 3 + last)
        self.assertEqual(reply.count(b"HTTP/1.1 200 OK"), 4, reply)
        self.assertEqual(reply.count(b'"data":[2.0,2.0]'), 3, reply)
        # One connection, many requests in turn.
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        for _ in range(5):
            conn.request("POST", "/v2/models/reduce/infer", body)
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        conn.close()


class HttpBodyBudgetTest(unittest.TestCase):
    """Connections that announce large bodies share one budget (grpc.memory_quota_bytes)."""

    def test_announced_bodies_past_the_budget_get_503(self):
        with tempfile.TemporaryDirectory() as tmp:
            repo = os.path.join(tmp, "repo")
            os.makedirs(repo)
            write_repository(repo)
            config = os.path.join(tmp, "server.yaml")
            with open(config, "w") as f:
                f.write(f"limits: {{max_request_bytes: {MAX_REQUEST_BYTES}}}\n"
                        f"grpc: {{memory_quota_bytes: {BODY_LIMIT + (BODY_LIMIT // 2)}}}\n")
            daemon = start_daemon(repo, config, ["--model-control-mode", "explicit",
                                                 "--load-model", "reduce"])
            try:
                head = (b"POST /v2/models/reduce/infer HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: %d\r\n\r\n" % BODY_LIMIT)
                held = socket.create_connection(("127.0.0.1", daemon.http_port), timeout=30)
                held.sendall(head + b"{")  # a body of the whole limit, still coming
                # Until the server has charged the held body, a probe may be admitted (it then
                # waits for its body): close it and probe again.
                reply, deadline = b"", time.monotonic() + 30
                while not reply and time.monotonic() < deadline:
                    probe = socket.create_connection(("127.0.0.1", daemon.http_port), timeout=1)
                    probe.sendall(head)
                    try:
                        reply = probe.recv(65536)
                    except socket.timeout:
                        pass
                    probe.close()
                self.assertTrue(reply.startswith(b"HTTP/1.1 503"), reply)
                self.assertIn(b"in flight", reply)
                held.close()
                # The budget comes back with the connection: a small request is served.
                deadline = time.monotonic() + 30
                while True:
                    conn = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=30)
                    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 1],
                                                   "datatype": "FP32", "data": [3]}]})
                    conn.request("POST", "/v2/models/reduce/infer", body)
                    status = conn.getresponse().status
                    conn.close()
                    if status == 200 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                self.assertEqual(status, 200)
            finally:
                self.assertEqual(daemon.stop(), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
