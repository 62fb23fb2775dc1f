#!/usr/bin/python3
"""String tensors (BYTES) end to end against the real reprise-server on loopback.

usage: string_tensor_test.py <reprise-server> <dir with the generated *_pb2.py stubs>

The repository is made here with onnx's helper:
- simple_string: like Triton's "simple_string" example. INPUT0 and INPUT1 are BYTES [-1, 16]
  (max_batch_size 8, dynamic batching) holding strings of integers; OUTPUT0 = INPUT0 + INPUT1 and
  OUTPUT1 = INPUT0 - INPUT1, as strings (Cast string -> int32, Add / Sub, Cast int32 -> string).
- strops: S BYTES [n] (no batch axis) through the other string ops: Equal with a constant
  string, Where, Gather, Slice, Concat, Reshape / Unsqueeze / Squeeze / Flatten, Identity, and
  Cast string -> float -> string (ONNX's parsing and formatting).

Requests use both forms Triton clients send (raw_input_contents with 4-byte length prefixes, and
bytes_contents), malformed length prefixes and counts, and text that is not a number; the
server must answer each with its own error and keep serving.
"""
import os
import struct
import sys
import unittest

import grpc
import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_test import DaemonTestCase, pb, save  # noqa: E402  (same command line)


def serialize(strings):
    """Triton's raw BYTES form: per element a 4-byte little-endian length, then the bytes."""
    out = b""
    for s in strings:
        b = s if isinstance(s, bytes) else str(s).encode()
        out += struct.pack("<I", len(b)) + b
    return out


def deserialize(raw):
    items, pos = [], 0
    while pos < len(raw):
        (n,) = struct.unpack_from("<I", raw, pos)
        items.append(raw[pos + 4:pos + 4 + n])
        pos += 4 + n
    return items


def write_repository(repo):
    s = TensorProto.STRING
    ins = [helper.make_tensor_value_info(n, s, ["batch", 16]) for n in ("INPUT0", "INPUT1")]
    outs = [helper.make_tensor_value_info(n, s, ["batch", 16]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Cast", ["INPUT0"], ["a"], to=TensorProto.INT32),
        helper.make_node("Cast", ["INPUT1"], ["b"], to=TensorProto.INT32),
        helper.make_node("Add", ["a", "b"], ["sum"]),
        helper.make_node("Sub", ["a", "b"], ["diff"]),
        helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=s),
        helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=s),
    ]
    save(helper.make_model(helper.make_graph(nodes, "simple_string", ins, outs),
                           opset_imports=[helper.make_opsetid("", 17)]),
         repo, "simple_string",
         "max_batch_size: 8\n"
         "dynamic_batching: {max_queue_delay_microseconds: 100}\n")

    inp = [helper.make_tensor_value_info("S", s, ["n"]),
           helper.make_tensor_value_info("N", s, ["k"])]
    outputs = [
        helper.make_tensor_value_info("is_yes", TensorProto.BOOL, ["n"]),
        helper.make_tensor_value_info("yes_or_no", s, ["n"]),
        helper.make_tensor_value_info("first_two_then_first", s, [3]),
        helper.make_tensor_value_info("grid", s, [1, "m"]),
        helper.make_tensor_value_info("as_float_text", s, ["k"]),
    ]
    init = [
        helper.make_tensor("yes", s, [], [b"yes"]),
        helper.make_tensor("no", s, [1], [b"no"]),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("starts", TensorProto.INT64, [1], [0]),
        helper.make_tensor("ends", TensorProto.INT64, [1], [2]),
        helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
        helper.make_tensor("shape2", TensorProto.INT64, [2], [-1, 1]),
    ]
    nodes = [
        helper.make_node("Identity", ["S"], ["s"]),
        helper.make_node("Equal", ["s", "yes"], ["is_yes"]),
        helper.make_node("Where", ["is_yes", "s", "no"], ["yes_or_no"]),
        helper.make_node("Slice", ["s", "starts", "ends", "axis0"], ["head"]),
        helper.make_node("Gather", ["s", "zero"], ["first"], axis=0),
        helper.make_node("Concat", ["head", "first"], ["first_two_then_first"], axis=0),
        helper.make_node("Reshape", ["s", "shape2"], ["column"]),
        helper.make_node("Unsqueeze", ["s", "axis0"], ["row"]),
        helper.make_node("Flatten", ["column"], ["flat"], axis=0),
        helper.make_node("Squeeze", ["row", "axis0"], ["again"]),
        helper.make_node("Unsqueeze", ["again", "axis0"], ["row2"]),
        helper.make_node("Concat", ["row2", "flat"], ["grid"], axis=1),
        helper.make_node("Cast", ["N"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["f"], ["as_float_text"], to=s),
    ]
    save(helper.make_model(helper.make_graph(nodes, "strops", inp, outputs, init),
                           opset_imports=[helper.make_opsetid("", 17)]),
         repo, "strops")


def string_request(model, inputs, form="raw"):
    """inputs: [(name, shape, [str, ...])]."""
    r = pb.ModelInferRequest(model_name=model)
    for name, shape, values in inputs:
        t = r.inputs.add(name=name, datatype="BYTES", shape=shape)
        if form == "raw":
            r.raw_input_contents.append(serialize(values))
        else:
            for v in values:
                t.contents.bytes_contents.append(v if isinstance(v, bytes) else str(v).encode())
    return r


class StringTensorTest(DaemonTestCase):
    repository = staticmethod(write_repository)
    server_config = "runtime: {cpu_threads: 4}\nlimits: {max_request_bytes: 65536}\n"

    def add_sub(self, a, b, form="raw"):
        rows = len(a) // 16
        response = self.infer(string_request(
            "simple_string", [("INPUT0", [rows, 16], a), ("INPUT1", [rows, 16], b)], form))
        self.assertEqual([o.datatype for o in response.outputs], ["BYTES", "BYTES"])
        self.assertEqual([list(o.shape) for o in response.outputs], [[rows, 16], [rows, 16]])
        self.assertEqual(len(response.raw_output_contents), 2)
        return [[int(x) for x in deserialize(raw)] for raw in response.raw_output_contents]

    def assert_serving(self):
        a = list(range(16))
        b = [1] * 16
        self.assertEqual(self.add_sub(a, b), [[x + 1 for x in a], [x - 1 for x in a]])
        self.assertIsNone(self.daemon.proc.poll(), "the server exited")

    def tearDown(self):
        self.assert_serving()

    def test_metadata_and_config_say_bytes(self):
        meta = self.daemon.stub.ModelMetadata(pb.ModelMetadataRequest(name="simple_string"))
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.inputs],
                         [("INPUT0", "BYTES", [-1, 16]), ("INPUT1", "BYTES", [-1, 16])])
        self.assertEqual([t.datatype for t in meta.outputs], ["BYTES", "BYTES"])
        config = self.daemon.stub.ModelConfig(pb.ModelConfigRequest(name="simple_string")).config
        self.assertEqual(config.max_batch_size, 8)
        types = [t.data_type for t in list(config.input) + list(config.output)]
        self.assertEqual(len(types), 4)
        for t in types:
            self.assertEqual(type(config).DESCRIPTOR.fields_by_name["input"].message_type
                             .fields_by_name["data_type"].enum_type.values_by_number[t].name,
                             "TYPE_STRING")

    def test_add_sub_raw_and_bytes_contents(self):
        rng = np.random.default_rng(7)
        for form in ("raw", "bytes_contents"):
            for _ in range(3):  # the first run of the shape captures, the next ones replay
                a = rng.integers(-1000, 1000, 16).tolist()
                b = rng.integers(-1000, 1000, 16).tolist()
                got = self.add_sub(a, b, form)
                self.assertEqual(got, [[x + y for x, y in zip(a, b)],
                                       [x - y for x, y in zip(a, b)]], form)

    def test_several_rows_pad_to_a_bucket(self):
        # 3 rows run in a batch of 4 (a capture bucket); the padding must not reach the client.
        a = list(range(48))
        b = [2 * x for x in a]
        self.assertEqual(self.add_sub([str(x) for x in a], [f"+{x}" for x in b]),
                         [[x + y for x, y in zip(a, b)], [x - y for x, y in zip(a, b)]])

    def test_other_string_ops(self):
        values = ["yes", "1e3", "0.1", "-inf", "nan", "yes"]
        numbers = ["1e3", "0.1", "-inf", "NaN", "+INF", "2.5E-3", "-0", "16777217"]
        response = self.infer(string_request("strops", [("S", [6], values),
                                                        ("N", [8], numbers)]))
        by_name = {o.name: (o, raw) for o, raw in zip(response.outputs,
                                                      response.raw_output_contents)}
        out, raw = by_name["is_yes"]
        self.assertEqual(out.datatype, "BOOL")
        self.assertEqual(list(raw), [1, 0, 0, 0, 0, 1])
        self.assertEqual(deserialize(by_name["yes_or_no"][1]),
                         [b"yes", b"no", b"no", b"no", b"no", b"yes"])
        self.assertEqual(deserialize(by_name["first_two_then_first"][1]), [b"yes", b"1e3", b"yes"])
        out, raw = by_name["grid"]
        self.assertEqual(list(out.shape), [1, 12])
        self.assertEqual(deserialize(raw), [v.encode() for v in values] * 2)
        # Shortest text that reads back as the same float32 (16777217 rounds to 2^24).
        self.assertEqual(deserialize(by_name["as_float_text"][1]),
                         [b"1000", b"0.1", b"-INF", b"NaN", b"INF", b"0.0025", b"-0", b"16777216"])

    def test_text_that_is_not_a_number(self):
        a = ["1"] * 15 + ["twelve"]
        self.refused(string_request("simple_string",
                                    [("INPUT0", [1, 16], a), ("INPUT1", [1, 16], ["1"] * 16)]),
                     grpc.StatusCode.INVALID_ARGUMENT, "string element 15", "\"twelve\"",
                     "is not a number")

    def test_malformed_raw_bytes(self):
        good = serialize(["1"] * 16)
        cases = [
            (serialize(["1"] * 15) + b"\x01\x00", "truncated 4-byte length prefix"),
            (good + struct.pack("<I", 10) + b"abc", "claims 10 bytes but only 3 remain"),
            (good + struct.pack("<I", 0xFFFFFFFF), "claims 4294967295 bytes but only 0 remain"),
            (serialize(["1"] * 15), "15 BYTES elements, expected 16"),
            (serialize(["1"] * 17), "17 BYTES elements, expected 16"),
            (b"", "0 BYTES elements, expected 16"),
        ]
        for raw, fragment in cases:
            r = pb.ModelInferRequest(model_name="simple_string")
            r.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 16])
            r.inputs.add(name="INPUT1", datatype="BYTES", shape=[1, 16])
            r.raw_input_contents.extend([good, raw])
            self.refused(r, grpc.StatusCode.INVALID_ARGUMENT, "INPUT1", fragment)

    def test_malformed_bytes_contents(self):
        self.refused(string_request("simple_string", [("INPUT0", [1, 16], ["1"] * 16),
                                                      ("INPUT1", [1, 16], ["1"] * 15)],
                                    "bytes_contents"),
                     grpc.StatusCode.INVALID_ARGUMENT, "15 values in bytes_contents, expected 16")
        r = string_request("simple_string", [("INPUT0", [1, 16], ["1"] * 16),
                                             ("INPUT1", [1, 16], ["1"] * 16)], "bytes_contents")
        r.inputs[1].contents.int_contents.extend([1] * 16)
        self.refused(r, grpc.StatusCode.INVALID_ARGUMENT, "INPUT1")

    def test_strings_over_the_request_limit(self):
        big = ["9" * 5000] * 16  # 80 KB of strings, over max_request_bytes (64 KiB)
        for form in ("raw", "bytes_contents"):
            self.refused(string_request("simple_string", [("INPUT0", [1, 16], big),
                                                          ("INPUT1", [1, 16], ["1"] * 16)], form),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_request_bytes")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
