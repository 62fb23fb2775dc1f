#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Run from anywhere: /usr/bin/python3 tests/fuzz/make_corpus.py. Needs protoc (the request seeds
are encoded from text format), onnx and numpy. The seeds are small valid inputs that reach
deep into each parser; libFuzzer mutates from there. The output is deterministic.
"""
import io
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- fuzz_infer_request: ModelInferRequest in protobuf wire format -------------------------
REQUESTS = {
    "raw_all": """
model_name: "fuzz" id: "r1"
inputs { name: "dense" datatype: "FP32" shape: 2 shape: 4 }
inputs { name: "ids" datatype: "INT64" shape: 2 shape: 1 }
inputs { name: "text" datatype: "BYTES" shape: 2 }
raw_input_contents: "\\000\\000\\200?\\000\\000\\000@\\000\\000@@\\000\\000\\200@\\000\\000\\240@\\000\\000\\300@\\000\\000\\340@\\000\\000\\000A"
raw_input_contents: "\\001\\000\\000\\000\\000\\000\\000\\000\\002\\000\\000\\000\\000\\000\\000\\000"
raw_input_contents: "\\002\\000\\000\\000hi\\000\\000\\000\\000"
""",
    "typed_all": """
model_name: "fuzz"
inputs { name: "dense" datatype: "FP32" shape: 1 shape: 4
         contents { fp32_contents: 1 fp32_contents: 2 fp32_contents: 3 fp32_contents: 4 } }
inputs { name: "ids" datatype: "INT64" shape: 1 shape: 3
         contents { int64_contents: 7 int64_contents: 8 int64_contents: 9 } }
inputs { name: "text" datatype: "BYTES" shape: 1 contents { bytes_contents: "hello" } }
outputs { name: "scores" }
""",
    "params": """
model_name: "fuzz" id: "p"
parameters { key: "priority" value { int64_param: 1 } }
parameters { key: "timeout" value { int64_param: 1000 } }
inputs { name: "dense" datatype: "FP32" shape: 1 shape: 4
         contents { fp32_contents: 1 fp32_contents: 2 fp32_contents: 3 fp32_contents: 4 } }
inputs { name: "ids" datatype: "INT64" shape: 1 shape: 0 }
inputs { name: "text" datatype: "BYTES" shape: 1 contents { bytes_contents: "" } }
outputs { name: "echo" parameters { key: "binary_data" value { bool_param: true } } }
outputs { name: "scores" }
""",
    "zero_rows": """
inputs { name: "dense" datatype: "FP32" shape: 0 shape: 4 }
inputs { name: "ids" datatype: "INT64" shape: 0 shape: 5 }
inputs { name: "text" datatype: "BYTES" shape: 0 }
raw_input_contents: "" raw_input_contents: "" raw_input_contents: ""
""",
    "huge_dims": """
inputs { name: "dense" datatype: "FP32" shape: 0 shape: 4 }
inputs { name: "ids" datatype: "INT64" shape: 0 shape: 2305843009213693952 }
inputs { name: "text" datatype: "BYTES" shape: 0 }
raw_input_contents: "" raw_input_contents: "" raw_input_contents: ""
""",
    "bad_bytes_prefix": """
inputs { name: "dense" datatype: "FP32" shape: 1 shape: 4 }
inputs { name: "ids" datatype: "INT64" shape: 1 shape: 1 }
inputs { name: "text" datatype: "BYTES" shape: 1 }
raw_input_contents: "\\000\\000\\200?\\000\\000\\000@\\000\\000@@\\000\\000\\200@"
raw_input_contents: "\\001\\000\\000\\000\\000\\000\\000\\000"
raw_input_contents: "\\377\\377\\377\\177ab"
""",
}


def request_seeds():
    proto_dir = os.path.join(ROOT, "proto")
    for name, text in REQUESTS.items():
        out = subprocess.run(
            ["protoc", "--proto_path=" + proto_dir, "--encode=inference.ModelInferRequest",
             "grpc_service.proto"], input=text.encode(), capture_output=True, check=True)
        write("fuzz_infer_request", name, out.stdout)


# --- fuzz_onnx_model: small ONNX models ----------------------------------------------------
def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="fuzz")
    m.ir_version = 8
    return m.SerializeToString()


def vi(name, elem=TensorProto.FLOAT, shape=("N", 4)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def onnx_seeds():
    f = TensorProto.FLOAT
    i64 = TensorProto.INT64
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    b = helper.make_tensor("b", f, [4], [0.5, -0.5, 1.0, 0.0])  # float_data
    write("fuzz_onnx_model", "add", model(
        [helper.make_node("Add", ["x", "y"], ["z"])], [vi("x"), vi("y")], [vi("z")]))
    write("fuzz_onnx_model", "gemm_relu", model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
         helper.make_node("Relu", ["h"], ["z"])], [vi("x")], [vi("z")], [w, b]))
    shape = numpy_helper.from_array(np.array([-1, 2, 2], dtype=np.int64), "shape")
    write("fuzz_onnx_model", "reshape_softmax", model(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Softmax", ["r"], ["z"], axis=-1)],
        [vi("x")], [vi("z", shape=("N", 2, 2))], [shape]))
    write("fuzz_onnx_model", "constant_fold", model(
        [helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
            "cv", f, [2, 2], [1.0, 2.0, 3.0, 4.0])),
         helper.make_node("Mul", ["c", "c"], ["c2"]),
         helper.make_node("Reshape", ["c2", "s"], ["c3"]),
         helper.make_node("Add", ["x", "c3"], ["z"])],
        [vi("x")], [vi("z")],
        [numpy_helper.from_array(np.array([4], dtype=np.int64), "s")]))
    idx = helper.make_tensor("idx", i64, [2], [0, 3])  # int64_data
    table = numpy_helper.from_array(np.ones((10, 4), dtype=np.float32), "table")
    write("fuzz_onnx_model", "gather_concat", model(
        [helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
         helper.make_node("Gather", ["x", "idx"], ["g2"], axis=1),
         helper.make_node("Concat", ["g2", "g2"], ["z"], axis=1)],
        [vi("x"), vi("ids", i64, ("N", 3))], [vi("z"), vi("g", shape=("N", 3, 4))],
        [idx, table]))
    starts = numpy_helper.from_array(np.array([1], dtype=np.int64), "starts")
    ends = numpy_helper.from_array(np.array([3], dtype=np.int64), "ends")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    write("fuzz_onnx_model", "slice_reduce_transpose", model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"]),
         helper.make_node("Transpose", ["s"], ["t"], perm=[1, 0]),
         helper.make_node("ReduceSum", ["t", "axes0"], ["z"], keepdims=1)],
        [vi("x")], [vi("z", shape=(1, "N"))],
        [starts, ends, axes, numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0")]))
    # A channel shuffle and split (the engine fuses it into one FusedTranspose step; the Shape
    # of the concatenation becomes its plan-time shape_of form).
    write("fuzz_onnx_model", "channel_shuffle", model(
        [helper.make_node("Neg", ["x"], ["a"]),
         helper.make_node("Concat", ["x", "a"], ["c"], axis=1),
         helper.make_node("Shape", ["c"], ["sc"]),
         helper.make_node("Reshape", ["c", "s1"], ["r1"]),
         helper.make_node("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
         helper.make_node("Reshape", ["t", "sc"], ["r2"]),
         helper.make_node("Slice", ["r2", "h0", "h1", "axes"], ["y0"]),
         helper.make_node("Slice", ["r2", "h1", "h2", "axes"], ["y1"])],
        [vi("x", shape=("N", 2, 2, 3))],
        [vi("y0", shape=("N", 2, 2, 3)), vi("y1", shape=("N", 2, 2, 3))],
        [numpy_helper.from_array(np.array([0, 2, 2, 2, 3], dtype=np.int64), "s1"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "h0"),
         numpy_helper.from_array(np.array([2], dtype=np.int64), "h1"),
         numpy_helper.from_array(np.array([4], dtype=np.int64), "h2"), axes]))
    cw = numpy_helper.from_array(np.ones((2, 1, 3, 3), dtype=np.float32), "cw")
    write("fuzz_onnx_model", "conv_pool", model(
        [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("MaxPool", ["c"], ["z"], kernel_shape=[2, 2], strides=[2, 2])],
        [vi("x", shape=("N", 1, 4, 4))], [vi("z", shape=("N", 2, 2, 2))], [cw]))
    # Convolutions concatenated along the channels, max-pooled, convolved and average-pooled:
    # the fused concatenation and poolings of conv chains, in the blocked layout.
    cw2 = numpy_helper.from_array(np.ones((3, 1, 1, 1), dtype=np.float32), "cw2")
    cw3 = numpy_helper.from_array(np.ones((2, 5, 3, 3), dtype=np.float32), "cw3")
    write("fuzz_onnx_model", "conv_concat_pool", model(
        [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["x", "cw2"], ["d"]),
         helper.make_node("Concat", ["c", "d"], ["cd"], axis=1),
         helper.make_node("MaxPool", ["cd"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                          ceil_mode=1),
         helper.make_node("Conv", ["m", "cw3"], ["e"], pads=[1, 1, 1, 1]),
         helper.make_node("AveragePool", ["e"], ["z"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          count_include_pad=1)],
        [vi("x", shape=("N", 1, 8, 8))], [vi("z", shape=("N", 2, 4, 4))], [cw, cw2, cw3]))
    # A zero Pad folded into an AveragePool, a squeeze-and-excitation scale, and a
    # BatchNormalization with its Relu after a concatenation: the channel ops of conv chains.
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), "pads")
    sw = numpy_helper.from_array(np.ones((3, 5, 1, 1), dtype=np.float32), "sw")
    sw2 = numpy_helper.from_array(np.ones((3, 3, 1, 1), dtype=np.float32), "sw2")
    bn = [numpy_helper.from_array(np.full((3,), v, dtype=np.float32), "bn" + str(i))
          for i, v in enumerate([1.0, 0.5, 0.0, 1.0])]
    write("fuzz_onnx_model", "conv_channel_ops", model(
        [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["x", "cw2"], ["d"]),
         helper.make_node("Concat", ["c", "d"], ["cd"], axis=1),
         helper.make_node("Pad", ["cd", "pads"], ["p"]),
         helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3]),
         helper.make_node("Conv", ["a", "sw"], ["e"]),
         helper.make_node("GlobalAveragePool", ["e"], ["g"]),
         helper.make_node("Sigmoid", ["g"], ["s"]),
         helper.make_node("Mul", ["e", "s"], ["m"]),
         helper.make_node("BatchNormalization", ["m"] + ["bn" + str(i) for i in range(4)],
                          ["b"]),
         helper.make_node("Relu", ["b"], ["r"]),
         helper.make_node("Conv", ["r", "sw2"], ["z"])],
        [vi("x", shape=("N", 1, 8, 8))], [vi("z", shape=("N", 3, 8, 8))],
        [cw, cw2, pads, sw, sw2] + bn))
    # A dilated 3x3 convolution folded at load (X made by ConstantOfShape, W expanded from one
    # filter, so that the seed stays small): 16 channels over 14x15 at dilation 2, run as the
    # undilated convolution over its 7x8 phases where that takes Winograd (conv_phases.cc).
    write("fuzz_onnx_model", "dilated_conv", model(
        [helper.make_node("ConstantOfShape", ["xs"], ["dx"],
                          value=helper.make_tensor("xv", f, [1], [0.5])),
         helper.make_node("Expand", ["w1", "wshape"], ["dw"]),
         helper.make_node("Conv", ["dx", "dw"], ["z"], pads=[2, 2, 2, 2], dilations=[2, 2])],
        [], [vi("z", shape=(1, 16, 14, 15))],
        [numpy_helper.from_array(np.array([1, 16, 14, 15], dtype=np.int64), "xs"),
         numpy_helper.from_array(
             np.linspace(-1, 1, 144, dtype=np.float32).reshape(1, 16, 3, 3), "w1"),
         numpy_helper.from_array(np.array([16, 16, 3, 3], dtype=np.int64), "wshape")]))
    # A chain of three 12-channel convolutions (the second with a residual) before NonZero: keyed
    # by its input's values, so the fuzz target's plan computes the chain at plan time (values
    # known then are plain; the chain's blocks pad 12 channels to 16).
    write("fuzz_onnx_model", "value_keyed_conv_chain", model(
        [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c2", "r1"], ["s2"]),
         helper.make_node("Relu", ["s2"], ["r2"]),
         helper.make_node("Conv", ["r2", "w2"], ["c3"], pads=[1, 1, 1, 1]),
         helper.make_node("NonZero", ["c3"], ["z"])],
        [vi("x", shape=(1, 3, 4, 4))], [vi("z", i64, shape=(4, "K"))],
        [numpy_helper.from_array(
            np.linspace(-1, 1, 324, dtype=np.float32).reshape(12, 3, 3, 3), "w1"),
         numpy_helper.from_array(
            np.linspace(1, -1, 1296, dtype=np.float32).reshape(12, 12, 3, 3), "w2")]))
    # NonMaxSuppression over 96 constant boxes (some without area, both diagonals) with scores
    # from the input: keyed by the input's values, so the fuzz target's plan selects the boxes.
    grid = np.linspace(0, 20, 96 * 4, dtype=np.float32).reshape(1, 96, 4)
    grid[0, ::2] = grid[0, ::2, ::-1]
    grid[0, ::11, 2] = grid[0, ::11, 0]
    write("fuzz_onnx_model", "nms_many_boxes", model(
        [helper.make_node("NonMaxSuppression", ["b", "x", "m", "t"], ["z"])],
        [vi("x", shape=(1, 2, 96))], [vi("z", i64, shape=("K", 3))],
        [numpy_helper.from_array(grid, "b"),
         numpy_helper.from_array(np.array([80], dtype=np.int64), "m"),
         numpy_helper.from_array(np.array([0.05], dtype=np.float32), "t")]))
    # Cut at the NonMaxSuppression: a Sigmoid in front (the prefix), a Gather of the kept boxes
    # after it (the tail), and the scores as an output of the prefix too.
    write("fuzz_onnx_model", "nms_cut", model(
        [helper.make_node("Sigmoid", ["x"], ["s"]),
         helper.make_node("NonMaxSuppression", ["b", "s", "m", "t"], ["k"]),
         helper.make_node("Gather", ["k", "c"], ["j"], axis=1),
         helper.make_node("Gather", ["b", "j"], ["z"], axis=1)],
        [vi("x", shape=(1, 2, 96))], [vi("z", shape=(1, "K", 4)), vi("s", shape=(1, 2, 96))],
        [numpy_helper.from_array(grid, "b"),
         numpy_helper.from_array(np.array([80], dtype=np.int64), "m"),
         numpy_helper.from_array(np.array([0.55], dtype=np.float32), "t"),
         numpy_helper.from_array(np.array(2, dtype=np.int64), "c")]))
    half = helper.make_tensor("h", TensorProto.FLOAT16, [2], [1.0, 2.0])
    i32 = helper.make_tensor("i", TensorProto.INT32, [2], [1, 2])
    write("fuzz_onnx_model", "cast_types", model(
        [helper.make_node("Cast", ["h"], ["hf"], to=f),
         helper.make_node("Cast", ["i"], ["if"], to=f),
         helper.make_node("Add", ["hf", "if"], ["z"])],
        [], [vi("z", shape=(2,))], [half, i32]))
    ext = TensorProto(name="e", data_type=f, dims=[4])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "16")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    write("fuzz_onnx_model", "external_data", model(
        [helper.make_node("Add", ["x", "e"], ["z"])], [vi("x")], [vi("z")], [ext]))
    write("fuzz_onnx_model", "constant_of_shape", model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor(
             "v", f, [1], [1.0])),
         helper.make_node("Add", ["x", "c"], ["z"])],
        [vi("x")], [vi("z")]))
    # The coverage ops (issue 20) on constant inputs, so that the load-time folding runs their
    # kernels on whatever the fuzzer makes of the indices, lengths and attributes.
    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    write("fuzz_onnx_model", "scatter_gather_nd", model(
        [helper.make_node("ScatterND", ["d", "si", "su"], ["s"], reduction="add"),
         helper.make_node("GatherND", ["s", "gi"], ["g"], batch_dims=1),
         helper.make_node("ScatterElements", ["s", "ei", "eu"], ["z"], axis=1)],
        [], [vi("z", shape=(2, 3)), vi("g", shape=(2,))],
        [const("d", np.arange(6, dtype=np.float32).reshape(2, 3)),
         const("si", np.array([[1], [-2]], dtype=np.int64)),
         const("su", np.ones((2, 3), dtype=np.float32)),
         const("gi", np.array([[2], [0]], dtype=np.int64)),
         const("ei", np.array([[0, 2]], dtype=np.int64)),
         const("eu", np.array([[7, 8]], dtype=np.float32))]))
    write("fuzz_onnx_model", "onehot_mod_window", model(
        [helper.make_node("OneHot", ["oi", "od", "ov"], ["o"], axis=-1),
         helper.make_node("Mod", ["o", "m"], ["z"], fmod=1),
         helper.make_node("HannWindow", ["ws"], ["w"], periodic=0),
         helper.make_node("EyeLike", ["o"], ["e"], k=1)],
        [], [vi("z", shape=(3, 4)), vi("w", shape=(5,)), vi("e", shape=(3, 4))],
        [const("oi", np.array([0, -1, 9], dtype=np.int64)),
         const("od", np.array(4, dtype=np.int64)),
         const("ov", np.array([0.5, 3.0], dtype=np.float32)),
         const("m", np.array([2.0], dtype=np.float32)),
         const("ws", np.array(5, dtype=np.int64))]))
    rng = np.random.default_rng(7)
    write("fuzz_onnx_model", "recurrent", model(
        [helper.make_node("LSTM", ["rx", "lw", "lr", "lb", "rl"], ["ly", "lh"], hidden_size=2,
                          direction="bidirectional"),
         helper.make_node("GRU", ["rx", "gw", "gr", "", "rl"], ["gy"], hidden_size=2,
                          linear_before_reset=1),
         helper.make_node("RNN", ["rx", "nw", "nr"], ["ny"], hidden_size=2,
                          activations=["Relu"], clip=5.0)],
        [], [vi("ly", shape=(3, 2, 1, 2)), vi("lh", shape=(2, 1, 2)),
             vi("gy", shape=(3, 1, 1, 2)), vi("ny", shape=(3, 1, 1, 2))],
        [const("rx", rng.standard_normal((3, 1, 2)).astype(np.float32)),
         const("lw", rng.standard_normal((2, 8, 2)).astype(np.float32)),
         const("lr", rng.standard_normal((2, 8, 2)).astype(np.float32)),
         const("lb", rng.standard_normal((2, 16)).astype(np.float32)),
         const("rl", np.array([2], dtype=np.int32)),
         const("gw", rng.standard_normal((1, 6, 2)).astype(np.float32)),
         const("gr", rng.standard_normal((1, 6, 2)).astype(np.float32)),
         const("nw", rng.standard_normal((1, 2, 2)).astype(np.float32)),
         const("nr", rng.standard_normal((1, 2, 2)).astype(np.float32))]))
    # Einsum as batched matrix products (in place, transposed, permuted) and the general loop
    # (its own generator, so that the seeds after it stay as they were).
    erng = np.random.default_rng(11)
    write("fuzz_onnx_model", "einsum", model(
        [helper.make_node("Einsum", ["ea", "eb"], ["es"], equation="bgid,bgjd->bgij"),
         helper.make_node("Einsum", ["ep", "eq"], ["et"], equation="ibd,jbd->bij"),
         helper.make_node("Einsum", ["ed"], ["eu"], equation="ii->i")],
        [], [vi("es", shape=(1, 2, 3, 3)), vi("et", shape=(2, 3, 4)), vi("eu", shape=(3,))],
        [const("ea", erng.standard_normal((1, 2, 3, 4)).astype(np.float32)),
         const("eb", erng.standard_normal((1, 2, 3, 4)).astype(np.float32)),
         const("ep", erng.standard_normal((3, 2, 5)).astype(np.float32)),
         const("eq", erng.standard_normal((4, 2, 5)).astype(np.float32)),
         const("ed", erng.standard_normal((3, 3)).astype(np.float32))]))
    image = const("im", rng.standard_normal((1, 2, 4, 4)).astype(np.float32))
    write("fuzz_onnx_model", "image_sampling", model(
        [helper.make_node("RoiAlign", ["im", "rois", "bi"], ["ra"], output_height=2,
                          output_width=2, sampling_ratio=2),
         helper.make_node("GridSample", ["im", "grid"], ["gs"], mode="bicubic",
                          padding_mode="reflection"),
         helper.make_node("MaxPool", ["im"], ["mp", "mi"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("MaxUnpool", ["mp", "mi"], ["mu"], kernel_shape=[2, 2],
                          strides=[2, 2])],
        [], [vi("ra", shape=(1, 2, 2, 2)), vi("gs", shape=(1, 2, 2, 2)),
             vi("mu", shape=(1, 2, 4, 4))],
        [image, const("rois", np.array([[0.5, 0.5, 3.0, 2.5]], dtype=np.float32)),
         const("bi", np.array([0], dtype=np.int64)),
         const("grid", rng.uniform(-1.2, 1.2, (1, 2, 2, 2)).astype(np.float32))]))
    write("fuzz_onnx_model", "signal", model(
        [helper.make_node("DFT", ["sx", "dl"], ["dft"], axis=1, onesided=1),
         helper.make_node("STFT", ["sx", "step", "win"], ["stft"]),
         helper.make_node("MelWeightMatrix", ["mb", "ml", "sr", "lo", "hi"], ["mel"])],
        [], [vi("dft", shape=("a", "b", "c")), vi("stft", shape=("a", "b", "c", "d")),
             vi("mel", shape=("a", "b"))],
        [const("sx", rng.standard_normal((1, 8, 1)).astype(np.float32)),
         const("dl", np.array(8, dtype=np.int64)),
         const("step", np.array(2, dtype=np.int64)),
         const("win", np.hanning(4).astype(np.float32)),
         const("mb", np.array(3, dtype=np.int32)), const("ml", np.array(8, dtype=np.int32)),
         const("sr", np.array(8000, dtype=np.int32)),
         const("lo", np.array(0.0, dtype=np.float32)),
         const("hi", np.array(4000.0, dtype=np.float32))]))
    write("fuzz_onnx_model", "legacy_opsets", model(
        [helper.make_node("TopK", ["tx"], ["tv", "ti"], k=2),
         helper.make_node("Upsample", ["tv"], ["z"], scales=[1.0, 2.0], mode="nearest")],
        [], [vi("z", shape=(1, 4))],
        [const("tx", np.array([[3.0, 1.0, 2.0]], dtype=np.float32))], opset=7))
    # Control flow: an If whose branches read outer values, a Loop with a data-dependent
    # condition and a scan output, an If nested in the Loop's body.
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["yt"])], "then", [],
                               [vi("yt")])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "two"], ["ye"])], "else", [],
                               [vi("ye")])
    inner_if = helper.make_node("If", ["c_in"], ["v_out"], then_branch=helper.make_graph(
        [helper.make_node("Add", ["v_in", "two"], ["vt"])], "t", [], [vi("vt", shape=(4,))]),
        else_branch=helper.make_graph(
        [helper.make_node("Mul", ["v_in", "two"], ["ve"])], "e", [], [vi("ve", shape=(4,))]))
    body = helper.make_graph(
        [inner_if, helper.make_node("ReduceMax", ["v_out"], ["m"], keepdims=0),
         helper.make_node("Less", ["m", "hundred"], ["c_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])], "body",
        [vi("i", i64, ()), vi("c_in", TensorProto.BOOL, ()), vi("v_in", shape=(4,))],
        [vi("c_out", TensorProto.BOOL, ()), vi("v_out", shape=(4,)), vi("scan", shape=(4,))])
    write("fuzz_onnx_model", "control_flow", model(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Loop", ["trips", "", "v0"], ["v", "scans"], body=body)],
        [vi("x"), vi("v0", shape=(4,))], [vi("y"), vi("v", shape=(4,)), vi("scans", shape=(5, 4))],
        [const("two", np.array(2, dtype=np.float32)), const("zero", np.array(0, dtype=np.float32)),
         const("hundred", np.array(100, dtype=np.float32)),
         const("trips", np.array(5, dtype=np.int64))]))
    repo = os.path.join(ROOT, "tools", "models", "repository", "add_sub", "1", "model.onnx")
    with open(repo, "rb") as fh:
        write("fuzz_onnx_model", "repository_add_sub", fh.read())


# --- fuzz_yaml_config: first byte '0' server config, '1' model settings --------------------
def yaml_seeds():
    with open(os.path.join(ROOT, "config", "reprise.yaml"), "rb") as fh:
        write("fuzz_yaml_config", "server_default", b"0" + fh.read())
    for name in ("mlp", "add_sub"):
        path = os.path.join(ROOT, "tools", "models", "repository", name, "config.yaml")
        with open(path, "rb") as fh:
            text = fh.read().replace(("name: " + name).encode(), b"name: m")
        write("fuzz_yaml_config", "model_" + name, b"1" + text)
    write("fuzz_yaml_config", "model_dynamic", b"1" + b"""name: m
max_batch_size: 4
input:
  - {name: x, data_type: TYPE_FP32, dims: [-1, 3]}
  - {name: s, data_type: TYPE_STRING, dims: [1]}
output:
  - {name: y, data_type: TYPE_FP32, dims: [-1]}
dynamic_batching: {max_queue_delay_microseconds: 100, preferred_batch_size: [2, 4]}
""")


# --- fuzz_npy: NumPy files ------------------------------------------------------------------
def npy_seeds():
    arrays = {
        "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i64_scalar": np.array(7, dtype=np.int64),
        "bool_4": np.array([True, False, True, True]),
        "f16_empty": np.zeros((0, 3), dtype=np.float16),
        "u8_3d": np.arange(8, dtype=np.uint8).reshape(2, 2, 2),
        "f64_fortran": np.asfortranarray(np.ones((2, 2), dtype=np.float64)),
        "big_endian": np.arange(3, dtype=">i4"),
    }
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a)
        write("fuzz_npy", name, buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(4, dtype=np.int32), version=(2, 0))
    write("fuzz_npy", "v2_i32", buf.getvalue())


# --- fuzz_http_request: KServe v2 REST bodies ("#<header length>\n" first for binary) -------
def http_seeds():
    import json
    req = {"id": "r1", "parameters": {"priority": 1, "binary_data_output": True},
           "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2.5], [3, -4]]},
                      {"name": "i", "shape": [2], "datatype": "INT8", "data": [-128, 127]},
                      {"name": "b", "shape": [1], "datatype": "BOOL", "data": [True]},
                      {"name": "s", "shape": [2], "datatype": "BYTES", "data": ["ab", ""]}],
           "outputs": [{"name": "y", "parameters": {"binary_data": False}}]}
    write("fuzz_http_request", "json_all", json.dumps(req).encode())
    header = json.dumps({"inputs": [
        {"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
        {"name": "s", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 6}}]})
    blob = np.array([1, 2], np.float32).tobytes() + b"\x02\x00\x00\x00hi"
    write("fuzz_http_request", "binary", b"#%d\n" % len(header) + header.encode() + blob)
    resp = {"model_name": "m", "model_version": "1", "outputs": [
        {"name": "y", "shape": [1, 2], "datatype": "UINT64", "data": [0, 18446744073709551615]},
        {"name": "z", "shape": [2], "datatype": "FP16", "parameters": {"binary_data_size": 4}}]}
    text = json.dumps(resp)
    write("fuzz_http_request", "response", b"#%d\n" % len(text) + text.encode() + b"\x00\x3c\x00\xbc")
    import gzip
    write("fuzz_http_request", "gzip", gzip.compress(json.dumps(req).encode(), mtime=0))


def main():
    http_seeds()
    request_seeds()
    onnx_seeds()
    yaml_seeds()
    npy_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
