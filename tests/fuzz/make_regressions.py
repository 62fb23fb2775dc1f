#!/usr/bin/python3
"""Writes the hand-made hostile models of tests/fuzz/regressions/fuzz_onnx_model/.

Each is a small ONNX model whose attributes or constant inputs once overflowed a size during
constant folding at load (undefined behaviour under UBSan), hung the loader, or crashed libonnx's
shape inference; fuzz_replay_test and the fuzz_onnx_model binary replay them. Deterministic:
/usr/bin/python3 tests/fuzz/make_regressions.py
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions", "fuzz_onnx_model")
F = TensorProto.FLOAT
B = 2**40


def save(name, nodes, inits, rank=2, elem=F, inputs=()):
    out = helper.make_tensor_value_info("z", elem, [None] * rank)
    graph = helper.make_graph(nodes, "g", list(inputs), [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(model.SerializeToString())


def i64(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def f32(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def main():
    os.makedirs(OUT, exist_ok=True)
    node = helper.make_node
    ones = np.ones((1, 1, 2, 2))
    value = helper.make_tensor("v", F, [1], [1.0])
    save("tile", [node("Tile", ["c", "r"], ["z"])], [f32("c", [[1.0]]), i64("r", [B, B])])
    save("tile2", [node("Tile", ["c", "r"], ["z"])],
         [f32("c", [[1.0, 2.0]]), i64("r", [2**62, 2**62])])
    save("expand", [node("Expand", ["c", "s"], ["z"])], [f32("c", [1.0]), i64("s", [B, B, B])], 3)
    save("cos", [node("ConstantOfShape", ["s"], ["z"], value=value)], [i64("s", [B, B])])
    save("pad", [node("Pad", ["c", "p"], ["z"])], [f32("c", [[1.0]]), i64("p", [2**62] * 4)])
    save("resize", [node("Resize", ["c", "", "sc"], ["z"])],
         [f32("c", [[[[1.0]]]]), f32("sc", [1, 1, 1e30, 1e30])], 4)
    save("resize_sizes", [node("Resize", ["c", "", "", "sz"], ["z"])],
         [f32("c", [[[[1.0]]]]), i64("sz", [1, 1, 2**62, 2**62])], 4)
    save("reshape", [node("Reshape", ["c", "s"], ["z"])],
         [f32("c", [1.0, 2.0]), i64("s", [2**62, 2**62, 0])], 3)
    save("slice", [node("Slice", ["c", "st", "en", "ax", "stp"], ["z"])],
         [f32("c", [1.0, 2.0, 3.0]), i64("st", [2**63 - 1]), i64("en", [-2**63]),
          i64("ax", [0]), i64("stp", [-2**63])], 1)
    save("slice2", [node("Slice", ["c", "st", "en", "ax", "stp"], ["z"])],
         [f32("c", [1.0, 2.0, 3.0]), i64("st", [-2**63]), i64("en", [2**63 - 1]),
          i64("ax", [0]), i64("stp", [2**63 - 1])], 1)
    save("split", [node("Split", ["c", "s"], ["z", "z2"])],
         [f32("c", [1.0, 2.0]), i64("s", [2**63 - 1, 3])], 1)
    save("conv", [node("Conv", ["c", "w"], ["z"], pads=[2**62] * 4, dilations=[2**62] * 2,
                       strides=[1, 1])], [f32("c", ones), f32("w", ones)], 4)
    save("maxpool", [node("MaxPool", ["c"], ["z"], kernel_shape=[2**62] * 2, pads=[2**62] * 4)],
         [f32("c", ones)], 4)
    save("avgpool", [node("AveragePool", ["c"], ["z"], kernel_shape=[3, 3], pads=[B] * 4,
                          strides=[1, 1])], [f32("c", ones)], 4)
    save("depthtospace", [node("DepthToSpace", ["c"], ["z"], blocksize=2**62)],
         [f32("c", np.ones((1, 4, 1, 1)))], 4)
    # A direct DFT of 2^16 - 1 points on 64 vectors ran for minutes at load (fuzz_onnx_model
    # timeout): refused as too costly.
    # libonnx 1.12's STFT shape inference dereferences null for a signal of rank 0 or 1 (SIGSEGV;
    # fuzz_onnx_model): STFT nodes are hidden from the inference, the kernel refuses the rank.
    save("stft_rank1", [node("Relu", ["c"], ["r"]), node("STFT", ["r", "st"], ["z"])],
         [f32("c", np.ones(8)), i64("st", 2)], 4)
    save("dft_direct", [node("DFT", ["c", "n"], ["z"], axis=1)],
         [f32("c", np.ones((64, 8, 1))), i64("n", 65535)], 3)
    # Weights with one spatial axis for an input (computed, so its rank is known only during
    # inference) with two: libonnx's convPoolShapeInference read past the kernel shape.
    save("conv_weight_rank", [node("Relu", ["c"], ["r"]), node("Conv", ["r", "w"], ["z"])],
         [f32("c", np.ones((1, 2, 8, 8))), f32("w", np.ones((3, 2, 1)))], 4)
    # A Pad whose pads are an empty constant, before a Conv: folding it into the Conv copied
    # zero bytes from a null pointer (UBSan; fuzz_onnx_model).
    x = helper.make_tensor_value_info("x", F, [1, 1, 4, 4])
    save("pad_empty_pads", [node("Pad", ["x", "p"], ["q"]), node("Conv", ["q", "w"], ["z"])],
         [i64("p", np.zeros(0, dtype=np.int64)), f32("w", ones)], 4, inputs=[x])
    # An Einsum whose output names a label twice ("i" in "...->igij"): the matrix-product form
    # counted it twice and read past its operand (ASan; fuzz_onnx_model). Refused as invalid.
    save("einsum_repeated_output", [node("Einsum", ["a", "b"], ["z"], equation="bgid,bgjd->igij")],
         [f32("a", np.ones((2, 3, 4, 5))), f32("b", np.ones((2, 3, 6, 5)))], 4)


if __name__ == "__main__":
    main()
