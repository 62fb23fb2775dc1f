#!/usr/bin/python3
"""Triton's extensions against the real reprise-server on loopback: load with a config override
and with uploaded files, system shared memory, classification.

usage: triton_extensions_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

The repository is made here (explicit mode):
- cls: Identity x[batch, 4] FP32 -> probs, max_batch_size 4, labels.txt on probs;
- cls_plain: the same graph with no config (no batching, no labels);
- addsub: a[n], b[n] FP32 -> sum = a + b, diff = a - b.
Uploads go to an upload_dir inside the test's temporary directory so that the test can see the
files appear and go. Requests follow the flows of Triton's Python client (load_model with
config= and files=, register_system_shared_memory, InferRequestedOutput(class_count=k)).
"""
import json
import os
import sys
import tempfile
import unittest
from multiprocessing import shared_memory

import grpc
import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_test import STUBS, Daemon  # noqa: E402  (same arguments; starts the daemon)

sys.path.insert(0, STUBS)
import grpc_service_pb2 as pb  # noqa: E402

LABELS = ["cat", "dog", "fish", "bird"]
MAX_UPLOAD_BYTES = 1 << 20
MAX_UPLOADED_MODELS = 2  # uploads alive at once; 4x that many names not in the repository


def model_bytes(graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def identity_graph(batch="batch"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 4])
    return helper.make_graph([helper.make_node("Identity", ["x"], ["probs"])], "cls", [x], [probs])


def addsub_graph():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n"])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n"])
    s = helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["n"])
    d = helper.make_tensor_value_info("diff", TensorProto.FLOAT, ["n"])
    return helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"]),
                              helper.make_node("Sub", ["a", "b"], ["diff"])],
                             "addsub", [a, b], [s, d])


def write(path, data, mode="wb"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(data)


def write_repository(repo):
    write(os.path.join(repo, "cls", "1", "model.onnx"), model_bytes(identity_graph()))
    write(os.path.join(repo, "cls", "labels.txt"), "\n".join(LABELS) + "\n", "w")
    write(os.path.join(repo, "cls", "config.yaml"),
          "max_batch_size: 4\n"
          "output: [{name: probs, data_type: TYPE_FP32, dims: [4], label_filename: labels.txt}]\n",
          "w")
    write(os.path.join(repo, "cls_plain", "1", "model.onnx"), model_bytes(identity_graph(2)))
    write(os.path.join(repo, "addsub", "1", "model.onnx"), model_bytes(addsub_graph()))


def strings(raw):
    """The elements of KServe's serialized BYTES form."""
    out, pos = [], 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos:pos + 4], "little")
        out.append(raw[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
    return out


def tree(path):
    """Every file under `path`, relative."""
    return sorted(os.path.relpath(os.path.join(d, f), path)
                  for d, _, files in os.walk(path) for f in files)


class TritonExtensionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.repo = os.path.join(cls.tmp.name, "repo")
        cls.uploads = os.path.join(cls.tmp.name, "uploads")
        write_repository(cls.repo)
        config = os.path.join(cls.tmp.name, "server.yaml")
        with open(config, "w") as f:
            f.write(f"repository: {{upload_dir: {cls.uploads}}}\n"
                    f"limits: {{max_upload_bytes: {MAX_UPLOAD_BYTES}, "
                    f"max_uploaded_models: {MAX_UPLOADED_MODELS}}}\n"
                    "runtime: {cpu_threads: 4}\n")
        cls.repo_files = tree(cls.repo)
        cls.daemon = Daemon(cls.repo, config, ["--model-control-mode", "explicit",
                                               "--load-model", "cls", "--load-model", "cls_plain",
                                               "--load-model", "addsub"])
        cls.stub = cls.daemon.stub

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        log = cls.daemon.log.decode(errors="replace")
        uploads_left = os.listdir(cls.uploads) if os.path.isdir(cls.uploads) else []
        cls.tmp.cleanup()
        if "ERROR: AddressSanitizer" in log or "runtime error:" in log or code != 0:
            raise AssertionError(f"reprise-server exited {code}:\n{log[-6000:]}")
        if uploads_left:
            raise AssertionError(f"uploads left after shutdown: {uploads_left}")

    def tearDown(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
        self.assertIsNone(self.daemon.proc.poll(), "the server exited")
        # Nothing is ever written into the operator's repository.
        self.assertEqual(tree(self.repo), self.repo_files)

    # ---- helpers ----

    def load(self, name, config=None, files=None):
        request = pb.RepositoryModelLoadRequest(model_name=name)
        if config is not None:
            request.parameters["config"].string_param = config
        for path, content in (files or {}).items():
            request.parameters["file:" + path].bytes_param = content
        return self.stub.RepositoryModelLoad(request, timeout=120)

    def load_fails(self, code, *fragments, **kwargs):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.load(**kwargs)
        if code is not None:
            self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, ctx.exception.details())

    def unload(self, name):
        self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=name),
                                        timeout=120)

    def infer(self, request):
        return self.stub.ModelInfer(request, timeout=60)

    def refused(self, request, code, *fragments):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.infer(request)
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, ctx.exception.details())

    def cls_request(self, x, model="cls", k=None):
        r = pb.ModelInferRequest(model_name=model)
        r.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        r.raw_input_contents.append(x.astype(np.float32).tobytes())
        out = r.outputs.add(name="probs")
        if k is not None:
            out.parameters["classification"].int64_param = k
        return r

    # ---- load overrides ----

    def test_config_override_replaces_the_config_for_that_load(self):
        config = json.dumps({"max_batch_size": 2, "output": [
            {"name": "probs", "data_type": "TYPE_FP32", "dims": [4],
             "label_filename": "labels.txt"}]})
        self.load("cls", config=config)
        got = self.stub.ModelConfig(pb.ModelConfigRequest(name="cls"), timeout=30).config
        self.assertEqual(got.max_batch_size, 2)
        self.refused(self.cls_request(np.zeros((3, 4))), grpc.StatusCode.INVALID_ARGUMENT,
                     "exceeds max_batch_size 2")
        # A load without parameters reads the repository again.
        self.load("cls")
        got = self.stub.ModelConfig(pb.ModelConfigRequest(name="cls"), timeout=30).config
        self.assertEqual(got.max_batch_size, 4)
        self.infer(self.cls_request(np.zeros((3, 4))))

    def test_malformed_config_override_fails_and_keeps_the_model(self):
        for config, fragment in [("{not json", "not a JSON ModelConfig"),
                                 ('{"max_batch_size": "many"}', "not a JSON ModelConfig"),
                                 ('{"sequence_batching": {}}', '"sequence_batching"'),
                                 ('{"max_batch_size": -1}', "max_batch_size"),
                                 ('{"output": [{"name": "nope", "data_type": "TYPE_FP32",'
                                  ' "dims": [4]}]}', '"nope"')]:
            with self.subTest(config=config):
                with self.assertRaises(grpc.RpcError) as ctx:
                    self.load("cls", config=config)
                self.assertIn("failed to load 'cls'", ctx.exception.details())
                self.assertIn(fragment, ctx.exception.details())
        # The version that served before still serves, with its config.
        response = self.infer(self.cls_request(np.ones((1, 4))))
        self.assertEqual(response.outputs[0].shape, [1, 4])

    def test_unknown_model_fails_to_load(self):
        self.load_fails(grpc.StatusCode.NOT_FOUND,
                        "failed to load 'no_such_model', failed to poll from model repository",
                        name="no_such_model")

    def test_uploaded_model_serves_and_its_files_go_on_unload(self):
        config = json.dumps({"backend": "onnxruntime", "max_batch_size": 0})
        self.load("uploaded", config=config,
                  files={"1/model.onnx": model_bytes(addsub_graph()),
                         "2/model.onnx": model_bytes(addsub_graph())})
        uploads = os.listdir(self.uploads)
        self.assertEqual(len(uploads), 1)
        self.assertEqual(tree(os.path.join(self.uploads, uploads[0])),
                         ["1/model.onnx", "2/model.onnx"])
        self.assertEqual(os.stat(os.path.join(self.uploads, uploads[0])).st_mode & 0o777, 0o700)
        r = pb.ModelInferRequest(model_name="uploaded")
        a, b = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)
        for name, value in (("a", a), ("b", b)):
            r.inputs.add(name=name, datatype="FP32", shape=[3])
            r.raw_input_contents.append(value.tobytes())
        response = self.infer(r)
        self.assertEqual(response.model_version, "2")  # latest of the uploaded versions
        np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], np.float32),
                                      a + b)
        # Loading it again with new files replaces the old upload.
        self.load("uploaded", config=config, files={"1/model.onnx": model_bytes(addsub_graph())})
        uploads_now = os.listdir(self.uploads)
        self.assertEqual(len(uploads_now), 1)
        self.assertNotEqual(uploads_now, uploads)
        self.unload("uploaded")
        self.assertEqual(os.listdir(self.uploads), [])
        self.refused(r, grpc.StatusCode.NOT_FOUND)
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30)
        self.assertNotIn("uploaded", [m.name for m in index.models])

    def test_uploaded_files_replace_a_repository_model(self):
        # An upload under a repository model's name serves the upload, then a plain load
        # serves the repository's model again; the repository itself is never written.
        config = json.dumps({"max_batch_size": 0})
        self.load("cls_plain", config=config,
                  files={"1/model.onnx": model_bytes(identity_graph(3))})
        response = self.infer(self.cls_request(np.zeros((3, 4)), model="cls_plain"))
        self.assertEqual(response.outputs[0].shape, [3, 4])
        self.load("cls_plain")
        self.assertEqual(os.listdir(self.uploads), [])
        response = self.infer(self.cls_request(np.zeros((2, 4)), model="cls_plain"))
        self.assertEqual(response.outputs[0].shape, [2, 4])

    def test_bad_file_overrides_are_refused(self):
        onnx_bytes = model_bytes(addsub_graph())
        config = "{}"
        for path in ["../escape/model.onnx", "1/../../model.onnx", "/abs/model.onnx",
                     "1//model.onnx", "./1/model.onnx", "1/"]:
            with self.subTest(path=path):
                self.load_fails(grpc.StatusCode.INVALID_ARGUMENT, "failed to load 'up'",
                                name="up", config=config, files={path: onnx_bytes})
        self.load_fails(grpc.StatusCode.INTERNAL,
                        "failed to load 'up', failed to poll from model repository",
                        "NAME_MAX", name="up", config=config,
                        files={"1/" + "m" * 256: onnx_bytes})
        self.load_fails(grpc.StatusCode.INVALID_ARGUMENT, '"config"', name="up",
                        files={"1/model.onnx": onnx_bytes})
        self.load_fails(grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_upload_bytes",
                        name="up", config=config,
                        files={"1/model.onnx": b"x" * (MAX_UPLOAD_BYTES + 1)})
        self.load_fails(None, "failed to load 'up'", name="up", config=config,
                        files={"1/model.onnx": b"not an onnx model"})
        self.assertEqual(os.listdir(self.uploads), [])
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30)
        self.assertNotIn("up", [m.name for m in index.models])

    def test_z_upload_names_are_bounded(self):
        # Named to run last: it uses up the names. Names that are not models of the repository
        # are remembered (their metric series stay), so their number is bounded.
        onnx_bytes = b"not an onnx model"  # fails at load, after the name is counted
        refused = None
        for i in range(4 * MAX_UPLOADED_MODELS + 1):
            try:
                self.load(f"name{i}", config="{}", files={"1/model.onnx": onnx_bytes})
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    refused = e
                    break
        self.assertIsNotNone(refused, "no name was refused")
        self.assertIn("max_uploaded_models", refused.details())
        # A name counted before can still be uploaded under.
        self.load("name0", config="{}", files={"1/model.onnx": model_bytes(addsub_graph())})
        self.unload("name0")

    # ---- system shared memory ----

    def shm_region(self, size):
        shm = shared_memory.SharedMemory(create=True, size=size)
        self.addCleanup(shm.unlink)
        self.addCleanup(shm.close)
        return shm

    def register(self, name, shm, offset=0, byte_size=None):
        self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
            name=name, key="/" + shm.name, offset=offset,
            byte_size=shm.size - offset if byte_size is None else byte_size), timeout=30)
        self.addCleanup(self.stub.SystemSharedMemoryUnregister,
                        pb.SystemSharedMemoryUnregisterRequest(name=""), timeout=30)

    @staticmethod
    def shm_params(params, region, offset, size):
        params["shared_memory_region"].string_param = region
        params["shared_memory_offset"].int64_param = offset
        params["shared_memory_byte_size"].int64_param = size

    def addsub_shm_request(self, a_offset=0, b_offset=12, sum_offset=24, sum_size=12,
                           region="io"):
        r = pb.ModelInferRequest(model_name="addsub")
        self.shm_params(r.inputs.add(name="a", datatype="FP32", shape=[3]).parameters, region,
                        a_offset, 12)
        self.shm_params(r.inputs.add(name="b", datatype="FP32", shape=[3]).parameters, region,
                        b_offset, 12)
        self.shm_params(r.outputs.add(name="sum").parameters, region, sum_offset, sum_size)
        r.outputs.add(name="diff")  # in the response
        return r

    def test_shared_memory_inputs_and_outputs(self):
        shm = self.shm_region(4096)
        data = np.ndarray((12,), np.float32, buffer=shm.buf)
        data[:] = 0
        data[0:3] = [1, 2, 3]
        data[3:6] = [10, 20, 30]
        self.register("io", shm)
        status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(),
                                                    timeout=30)
        self.assertEqual(status.regions["io"].key, "/" + shm.name)
        self.assertEqual(status.regions["io"].byte_size, 4096)

        response = self.infer(self.addsub_shm_request())
        np.testing.assert_array_equal(data[6:9], [11, 22, 33])
        self.assertEqual([o.name for o in response.outputs], ["sum", "diff"])
        self.assertEqual(list(response.outputs[0].shape), [3])
        self.assertEqual(response.raw_output_contents[0], b"")  # in the region, not here
        np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[1], np.float32),
                                      [-9, -18, -27])
        # Mixed: a raw input beside a shared-memory one (raw entries only for raw inputs).
        r = pb.ModelInferRequest(model_name="addsub")
        self.shm_params(r.inputs.add(name="a", datatype="FP32", shape=[3]).parameters, "io", 0,
                        12)
        r.inputs.add(name="b", datatype="FP32", shape=[3])
        r.raw_input_contents.append(np.array([5, 5, 5], np.float32).tobytes())
        response = self.infer(r)
        np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], np.float32),
                                      [6, 7, 8])

    def test_shared_memory_offsets_and_sizes_are_checked(self):
        shm = self.shm_region(4096)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.register("big", shm, offset=4000, byte_size=200)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                name="x", key="/no-such-reprise-key", byte_size=8), timeout=30)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.register("small", shm, offset=1024, byte_size=64)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.register("small", shm)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.ALREADY_EXISTS)

        bad = grpc.StatusCode.INVALID_ARGUMENT
        self.refused(self.addsub_shm_request(a_offset=60, region="small"), bad, "input \"a\"",
                     "past the end of region")
        self.refused(self.addsub_shm_request(a_offset=(1 << 63) - 8, region="small"), bad)
        self.refused(self.addsub_shm_request(sum_offset=64, sum_size=12, region="small"), bad,
                     "output \"sum\"")
        self.refused(self.addsub_shm_request(sum_offset=-4, region="small"), bad)
        self.refused(self.addsub_shm_request(sum_size=8, region="small"), bad,
                     "should be at least 12 bytes")
        r = self.addsub_shm_request(region="small")
        r.inputs[0].parameters["shared_memory_byte_size"].int64_param = 8  # 3 floats need 12
        self.refused(r, bad, "expected 12")
        self.refused(self.addsub_shm_request(region="nope"), grpc.StatusCode.NOT_FOUND,
                     "Unable to find shared memory region")
        self.infer(self.addsub_shm_request(region="small"))  # the good one works

    def test_unregistered_region_cannot_be_used(self):
        shm = self.shm_region(4096)
        self.register("gone", shm)
        self.infer(self.addsub_shm_request(region="gone"))
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="gone"),
                                               timeout=30)
        status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(),
                                                    timeout=30)
        self.assertNotIn("gone", status.regions)
        self.refused(self.addsub_shm_request(region="gone"), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.SystemSharedMemoryUnregister(
                pb.SystemSharedMemoryUnregisterRequest(name="gone"), timeout=30)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_cuda_shared_memory_says_no_gpu(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.CudaSharedMemoryRegister(pb.CudaSharedMemoryRegisterRequest(name="g"),
                                               timeout=30)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("GPU", ctx.exception.details())

    # ---- classification ----

    def test_classification_with_labels(self):
        x = np.array([[0.1, 0.6, 0.2, 0.1], [0.7, 0.05, 0.05, 0.2]], np.float32)
        response = self.infer(self.cls_request(x, k=2))
        out = response.outputs[0]
        self.assertEqual(out.datatype, "BYTES")
        self.assertEqual(list(out.shape), [2, 2])
        self.assertEqual(strings(response.raw_output_contents[0]),
                         ["0.600000:1:dog", "0.200000:2:fish", "0.700000:0:cat",
                          "0.200000:3:bird"])

    def test_classification_without_labels(self):
        x = np.array([[3, 1, 4, 1], [5, 9, 2, 6]], np.float32)
        response = self.infer(self.cls_request(x, model="cls_plain", k=3))
        self.assertEqual(list(response.outputs[0].shape), [3])  # unbatched: one row of 8
        self.assertEqual(strings(response.raw_output_contents[0]),
                         ["9.000000:5", "6.000000:7", "5.000000:4"])
        self.refused(self.cls_request(x, model="cls_plain", k=-1),
                     grpc.StatusCode.INVALID_ARGUMENT, "classification")

    def test_metadata_lists_the_extensions(self):
        extensions = self.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30).extensions
        for name in ("classification", "system_shared_memory", "model_repository"):
            self.assertIn(name, extensions)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
