#!/usr/bin/python3
"""Starts the real reprise-server binary on loopback and drives it with Python's gRPC client
and with the `reprise` CLI.

usage: daemon_test.py <reprise-server> <dir with the generated *_pb2.py stubs> <reprise CLI>
                      <source dir>

The repository is a copy of tools/models/repository (mlp, add_sub) plus a broken model and two
slow ones made here (slow_q: one stream, max_queue_size 1). Checks: every RPC of the protocol
and the admin service, results equal to the zoo's reference outputs, status codes of bad
requests, the broken model UNAVAILABLE with the engine's reason, a full model queue
RESOURCE_EXHAUSTED, reflection, SIGTERM with requests in flight (all complete, exit 0), a bad
flag exits 2, every CLI subcommand in --json mode, and strict readiness: with the broken model
asked for at startup the daemon stays unready (health "" NOT_SERVING, `reprise healthcheck`
fails) while liveness holds; the other tests run with --strict-readiness=false.
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np
import onnx
from onnx import TensorProto, helper

SERVER, STUBS, CLI, SOURCE = sys.argv[1:5]
sys.path.insert(0, STUBS)
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import reprise_admin_pb2 as admin_pb  # noqa: E402
import reprise_admin_pb2_grpc as admin_grpc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_log import read_until_started  # noqa: E402

REPO = os.path.join(SOURCE, "tools", "models", "repository")
ZOO = os.path.join(SOURCE, "tools", "models", "zoo", "mlp")


SLOW_WEIGHTS = [np.random.default_rng(i).standard_normal((64 if i == 0 else 1024, 1024))
                .astype(np.float32) * (0.125 if i == 0 else 0.03) for i in range(6)]


def write_slow_model(repo, name="slow", config=None):
    """slow/1/model.onnx: x [N,64] through six MatMuls (64x1024, then 1024x1024 five times; the
    weights are initializers, so requests stay small): about 0.7 GFLOP per request of N = 64."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1024])
    nodes, inits, prev = [], [], "x"
    for i, w in enumerate(SLOW_WEIGHTS):
        out = "y" if i == len(SLOW_WEIGHTS) - 1 else "h%d" % i
        inits.append(helper.make_tensor("w%d" % i, TensorProto.FLOAT, w.shape,
                                        w.tobytes(), raw=True))
        nodes.append(helper.make_node("MatMul", [prev, "w%d" % i], [out], name="mm%d" % i))
        prev = out
    model = helper.make_model(helper.make_graph(nodes, "slow", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(os.path.join(repo, name, "1"))
    onnx.save(model, os.path.join(repo, name, "1", "model.onnx"))
    if config:
        with open(os.path.join(repo, name, "config.yaml"), "w") as f:
            f.write(config)


def tensor_request(model, **inputs):
    request = pb.ModelInferRequest(model_name=model)
    for name, array in inputs.items():
        request.inputs.add(name=name, datatype="FP32", shape=list(array.shape))
        request.raw_input_contents.append(np.ascontiguousarray(array, np.float32).tobytes())
    return request


def output_array(response, i):
    out = response.outputs[i]
    return np.frombuffer(response.raw_output_contents[i], np.float32).reshape(list(out.shape))


class Daemon:
    """reprise-server on 127.0.0.1 with a free port, over a temporary repository."""

    def __init__(self, test, extra, wait_ready=True):
        self.repo = tempfile.TemporaryDirectory()
        shutil.copytree(REPO, self.repo.name, dirs_exist_ok=True)
        os.makedirs(os.path.join(self.repo.name, "broken", "1"))
        with open(os.path.join(self.repo.name, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"not an onnx model")
        # An explicit max_batch_size 0 keeps auto-complete from batching them (requests of 64
        # and 256 rows).
        write_slow_model(self.repo.name, config="max_batch_size: 0\n")
        write_slow_model(self.repo.name, "slow_q", "max_batch_size: 0\nmax_queue_size: 1\n"
                         "instance_group: [{count: 1, kind: KIND_CPU}]\n")
        # One OpenMP thread, as tools/start-server.sh runs it (see docs/development.md).
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        # Eight inference threads whatever the machine: requests reach the model's stream
        # queue (with fewer threads they wait in the server's thread pool instead).
        config = os.path.join(self.repo.name, "server.yaml")
        with open(config, "w") as f:
            f.write("runtime: {cpu_threads: 8}\n")
        self.proc = subprocess.Popen(
            [SERVER, "--config", config, "--model-repository", self.repo.name, "--grpc-address=127.0.0.1",
             "--grpc-port=0", "--http-port=0", "--metrics-port=0", "--exit-timeout-secs", "30"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)  # see server_log.py
        self.log, self.port, _ = read_until_started(self.proc, 30)
        test.assertIsNotNone(self.port, "server did not start: " + self.log.decode(errors="replace"))
        self.addr = "127.0.0.1:%d" % self.port
        self.channel = grpc.insecure_channel(self.addr)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.admin = admin_grpc.RuntimeInstancesStub(self.channel)
        deadline = time.monotonic() + 60
        while wait_ready and not self.stub.ServerReady(pb.ServerReadyRequest()).ready:
            test.assertLess(time.monotonic(), deadline, "server never became ready")
            time.sleep(0.05)

    def wait_for_log(self, test, needle, seconds=60):
        """Reads the daemon's log until a line holds `needle`; that line."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.log += line
                if needle.encode() in line:
                    return line.decode(errors="replace")
        test.fail("no log line with %r:\n%s" % (needle, self.log.decode(errors="replace")))

    def close(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.repo.cleanup()


class DaemonTest(unittest.TestCase):
    def setUp(self):
        # Control mode none: every model loads at start, the broken one fails; the server serves
        # the others and, without strict readiness, says ready.
        self.d = Daemon(self, ["--strict-readiness=false"])
        self.stub = self.d.stub

    def tearDown(self):
        self.d.close()

    def code_of(self, call, request):
        with self.assertRaises(grpc.RpcError) as err:
            call(request)
        return err.exception.code()

    def test_every_rpc_with_real_models(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertEqual(self.stub.ServerMetadata(pb.ServerMetadataRequest()).name, "reprise")
        health = health_pb2_grpc.HealthStub(self.d.channel)
        self.assertEqual(health.Check(health_pb2.HealthCheckRequest()).status,
                         health_pb2.HealthCheckResponse.SERVING)

        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        rows = {(m.name, m.version): (m.state, m.reason) for m in index.models}
        self.assertEqual(rows[("mlp", "1")][0], "READY")
        self.assertEqual(rows[("add_sub", "1")][0], "READY")
        self.assertEqual(rows[("broken", "1")][0], "UNAVAILABLE")
        self.assertIn("model.onnx", rows[("broken", "1")][1])  # the engine's message
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="broken")).ready)

        meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"))
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.inputs],
                         [("input", "FP32", [-1, 64])])
        self.assertEqual([(t.name, list(t.shape)) for t in meta.outputs], [("output", [-1, 10])])
        config = self.stub.ModelConfig(pb.ModelConfigRequest(name="mlp")).config
        self.assertEqual(config.max_batch_size, 8)

        for batch in ("b1", "b4"):
            x = np.load(os.path.join(ZOO, "input_%s.npy" % batch))
            want = np.load(os.path.join(ZOO, "output_%s.npy" % batch))
            for _ in range(2):
                response = self.stub.ModelInfer(tensor_request("mlp", input=x))
                np.testing.assert_allclose(output_array(response, 0), want, atol=1e-4)
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        b = np.ones((2, 4), np.float32)
        response = self.stub.ModelInfer(tensor_request("add_sub", a=a, b=b))
        self.assertEqual([o.name for o in response.outputs], ["sum", "diff"])
        np.testing.assert_array_equal(output_array(response, 0), a + b)
        np.testing.assert_array_equal(output_array(response, 1), a - b)

        streamed = list(self.stub.ModelStreamInfer(
            iter([tensor_request("add_sub", a=a, b=b), tensor_request("nope", a=a)])))
        self.assertEqual(len(streamed), 2)
        self.assertEqual(streamed[0].error_message, "")
        np.testing.assert_array_equal(output_array(streamed[0].infer_response, 0), a + b)
        self.assertIn("nope", streamed[1].error_message)

        stats = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="mlp")).model_stats[0]
        self.assertEqual(stats.inference_count, 2 * 1 + 2 * 4)
        self.assertEqual(stats.execution_count, 4)
        self.assertEqual(stats.inference_stats.success.count, 4)
        self.assertEqual(stats.inference_stats.queue.count, 4)
        self.assertGreater(stats.inference_stats.compute_infer.ns, 0)

        instances = self.d.admin.ListInstances(admin_pb.ListInstancesRequest(model="mlp"))
        shapes = sorted(i.shape_signature for i in instances.instances)
        self.assertEqual(shapes, ["input:[1,64]", "input:[4,64]"])
        dump = self.d.admin.DumpInstance(admin_pb.DumpInstanceRequest(
            model="mlp", stream=instances.instances[0].stream,
            shape_signature=instances.instances[0].shape_signature))
        json.loads(dump.json)  # valid JSON

        # Bad requests.
        self.assertEqual(self.code_of(self.stub.ModelInfer, tensor_request("nope", a=a)),
                         grpc.StatusCode.NOT_FOUND)
        r = tensor_request("add_sub", a=a, b=b)
        r.model_version = "3"
        self.assertEqual(self.code_of(self.stub.ModelInfer, r), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(self.code_of(self.stub.ModelInfer, tensor_request("broken", a=a)),
                         grpc.StatusCode.UNAVAILABLE)
        for bad in (tensor_request("add_sub", a=a),                    # missing input
                    tensor_request("add_sub", a=a, b=b, c=b),          # extra input
                    tensor_request("add_sub", a=a, b=np.ones((2, 5)))):  # wrong shape
            self.assertEqual(self.code_of(self.stub.ModelInfer, bad),
                             grpc.StatusCode.INVALID_ARGUMENT)
        r = tensor_request("add_sub", a=a, b=b)
        r.inputs[0].datatype = "FP64"
        self.assertEqual(self.code_of(self.stub.ModelInfer, r), grpc.StatusCode.INVALID_ARGUMENT)
        r = tensor_request("add_sub", a=a, b=b)
        r.raw_input_contents[1] = r.raw_input_contents[1][:-4]
        self.assertEqual(self.code_of(self.stub.ModelInfer, r), grpc.StatusCode.INVALID_ARGUMENT)
        r = tensor_request("add_sub", a=a, b=b)
        r.inputs[0].contents.fp32_contents.append(1.0)
        self.assertEqual(self.code_of(self.stub.ModelInfer, r), grpc.StatusCode.INVALID_ARGUMENT)
        # Control mode none: explicit loads are refused.
        self.assertEqual(self.code_of(self.stub.RepositoryModelLoad,
                                      pb.RepositoryModelLoadRequest(model_name="mlp")),
                         grpc.StatusCode.FAILED_PRECONDITION)

        # Reflection: list_services (field 7 of ServerReflectionRequest, an empty string).
        reflect = self.d.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda m: m, response_deserializer=lambda m: m)
        answer = b"".join(reflect(iter([b"\x3a\x00"])))
        for service in (b"inference.GRPCInferenceService", b"grpc.health.v1.Health",
                        b"reprise.v1.RuntimeInstances"):
            self.assertIn(service, answer)

        # An idle client connection keeps the daemon's shutdown waiting about 5 s (gRPC).
        self.d.channel.close()
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.d.proc.wait(timeout=30), 0)

    def test_full_model_queue_is_resource_exhausted(self):
        # One stream, at most one waiter: of eight requests sent together, the first runs, one
        # may wait, and those arriving meanwhile are refused. Arrival is up to the machine, so a
        # burst is repeated (at most five times) until one was refused; every other request
        # must succeed. When all eight arrive before the stream takes the first, only that one
        # is admitted (it is the waiter), so a burst may end with a single success.
        x = np.ones((256, 64), np.float32)
        ok, refused, sent = 0, [], 0
        for _ in range(5):
            sent += 8
            futures = [self.stub.ModelInfer.future(tensor_request("slow_q", x=x), timeout=120)
                       for _ in range(8)]
            for f in futures:
                try:
                    f.result()
                    ok += 1
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
                    refused.append(e.details())
            if refused:
                break
        self.assertEqual(ok + len(refused), sent)
        self.assertGreaterEqual(ok, 1)
        self.assertGreaterEqual(len(refused), 1)
        self.assertIn('model "slow_q" version 1', refused[0])
        self.assertIn("queue limit is 1", refused[0])
        # The model serves again once the queue drained.
        self.stub.ModelInfer(tensor_request("slow_q", x=x))

    def test_sigterm_completes_requests_in_flight(self):
        x = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32)
        request = tensor_request("slow", x=x)
        futures = [self.stub.ModelInfer.future(request, timeout=120) for _ in range(8)]
        # Once one has finished (its first run also plans and captures), the server has long
        # received the rest (16 KiB each, sent together before it); with two streams most of
        # them still wait or run.
        while not any(f.done() for f in futures):
            time.sleep(0.005)
        pending = sum(not f.done() for f in futures)
        self.d.proc.send_signal(signal.SIGTERM)
        self.assertGreater(pending, 0, "the requests finished before SIGTERM; nothing was tested")
        want = x
        for w in SLOW_WEIGHTS:
            want = want @ w
        for f in futures:
            response = f.result()  # raises if the request failed
            np.testing.assert_allclose(output_array(response, 0), want, rtol=1e-3, atol=1e-5)
        self.assertEqual(self.d.proc.wait(timeout=60), 0)
        self.d.log += self.d.proc.stdout.read()
        self.assertIn(b"shutdown complete", self.d.log)


class StrictReadinessTest(unittest.TestCase):
    def test_failed_startup_model_keeps_the_daemon_unready(self):
        d = Daemon(self, [], wait_ready=False)  # strict readiness is the default
        try:
            line = d.wait_for_log(self, "server not ready (strict readiness)")
            self.assertIn("broken", line)
            self.assertFalse(d.stub.ServerReady(pb.ServerReadyRequest()).ready)
            self.assertTrue(d.stub.ServerLive(pb.ServerLiveRequest()).live)
            health = health_pb2_grpc.HealthStub(d.channel)
            self.assertEqual(health.Check(health_pb2.HealthCheckRequest()).status,
                             health_pb2.HealthCheckResponse.NOT_SERVING)
            self.assertEqual(health.Check(health_pb2.HealthCheckRequest(service="liveness")).status,
                             health_pb2.HealthCheckResponse.SERVING)
            # The models that loaded serve all the same.
            self.assertTrue(d.stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready)
            r = subprocess.run([CLI, "--addr", d.addr, "healthcheck"], capture_output=True,
                               timeout=60)
            self.assertNotEqual(r.returncode, 0)
        finally:
            d.close()


class CliTest(unittest.TestCase):
    def setUp(self):
        self.d = Daemon(self, ["--model-control-mode=explicit", "--load-model=mlp"])
        self.out = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.d.close()
        self.out.cleanup()

    def cli(self, *args, ok=True):
        result = subprocess.run([CLI, "--addr", self.d.addr, "--json"] + list(args),
                                capture_output=True, timeout=60)
        if ok:
            self.assertEqual(result.returncode, 0, result.stderr.decode())
            return json.loads(result.stdout)
        self.assertEqual(result.returncode, 1, result.stdout.decode())
        return result.stderr.decode()

    def test_every_subcommand(self):
        self.assertEqual(self.cli("health"), {"live": True, "ready": True, "health": "SERVING"})
        models = {(m["name"], m["version"]): m["state"] for m in self.cli("models")["models"]}
        self.assertEqual(models[("mlp", "1")], "READY")
        self.assertIn(("add_sub", ""), models)  # known, never loaded

        self.assertEqual(self.cli("load", "add_sub"), {"model": "add_sub", "loaded": True})
        meta = self.cli("metadata", "add_sub")
        self.assertEqual([i["name"] for i in meta["inputs"]], ["a", "b"])
        out = self.cli("infer", "add_sub", "--input", "a=random", "--input", "b=random",
                       "--output-dir", self.out.name)
        self.assertEqual([(o["name"], o["shape"]) for o in out["outputs"]],
                         [("sum", [1, 4]), ("diff", [1, 4])])
        s = np.load(os.path.join(self.out.name, "sum.npy"))
        d = np.load(os.path.join(self.out.name, "diff.npy"))
        np.testing.assert_allclose((s + d) / 2 - (s - d) / 2, d, atol=1e-6)  # b = (s - d) / 2

        out = self.cli("infer", "mlp", "--input", "input=" + os.path.join(ZOO, "input_b4.npy"),
                       "--output-dir", self.out.name)
        self.assertEqual(out["outputs"][0]["file"], os.path.join(self.out.name, "output.npy"))
        np.testing.assert_allclose(np.load(os.path.join(self.out.name, "output.npy")),
                                   np.load(os.path.join(ZOO, "output_b4.npy")), atol=1e-4)

        stats = self.cli("stats", "mlp")["model_stats"]
        self.assertEqual(stats[0]["inference_count"], "4")  # uint64 prints as a JSON string
        instances = self.cli("instances", "mlp")["instances"]
        self.assertEqual([(i["stream"], i["shape_signature"]) for i in instances],
                         [(0, "input:[4,64]")])
        dump = self.cli("dump", "mlp", "--stream", "0", "--shape", "input:[4,64]")
        self.assertIsInstance(dump, dict)

        # profile: a trace with one span per plan step per run, on the stream's row, and a table.
        trace_path = os.path.join(self.out.name, "trace.json")
        profile = self.cli("profile", "mlp", "--iterations", "3", "--top", "4", "--trace",
                           trace_path)
        self.assertIn("steps by total time", profile["table"])
        self.assertIn("outside kernels", profile["table"])
        with open(trace_path) as f:
            trace = json.load(f)
        self.assertEqual(trace, json.loads(profile["trace_json"]))
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        rows = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
                if e["name"] == "thread_name"}
        steps = [e for e in spans if e["cat"] == "step"]
        self.assertEqual(trace["otherData"]["mode"], "replay")
        self.assertEqual(len([e for e in spans if e["cat"] == "run"]), 3)
        self.assertEqual(len(steps), 3 * trace["otherData"]["steps"])
        self.assertEqual({rows[e["tid"]] for e in steps}, {"stream 0"})
        err = self.cli("profile", "mlp", "--iterations", "1000", ok=False)
        self.assertIn("INVALID_ARGUMENT", err)
        self.assertEqual(self.cli("unload", "add_sub"), {"model": "add_sub", "unloaded": True})

        err = self.cli("metadata", "nope", ok=False)
        self.assertIn("NOT_FOUND", err)
        self.assertIn("nope", err)
        err = self.cli("dump", "mlp", "--stream", "1", "--shape", "input:[4,64]", ok=False)
        self.assertIn("NOT_FOUND", err)
        result = subprocess.run([CLI, "frobnicate"], capture_output=True, timeout=30)
        self.assertEqual(result.returncode, 2)


class BadFlagTest(unittest.TestCase):
    def test_unknown_flag_exits_2(self):
        result = subprocess.run([SERVER, "--grpc-prot=1"], capture_output=True, timeout=30)
        self.assertEqual(result.returncode, 2)
        self.assertIn(b"unknown flag --grpc-prot", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
