#!/usr/bin/python3
"""ONNX node test cases with string data for the ops that move or compare strings, which ONNX
1.12's own test data only has for Cast / CastLike; then runs onnx_conformance on them (each case
in eager and replay mode, like the ONNX test data).

usage: string_cases.py <onnx_conformance binary>

The cases use ONNX's node test layout (model.onnx, test_data_set_N/{input,output}_K.pb); the
expected outputs come from NumPy's own operations on object arrays of str. Exits 1 unless every
case passes.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WORDS = np.array([["alpha", "", "gamma"], ["δέλτα", "e\x00f", "zeta"]], dtype=object)


def case(root, name, node, inputs, outputs):
    """inputs / outputs: [(name, array)]; int64 and bool arrays keep their type."""
    def info(n, a):
        elem = TensorProto.STRING if a.dtype == object else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]
        return helper.make_tensor_value_info(n, elem, list(a.shape))
    graph = helper.make_graph([node], name, [info(n, a) for n, a in inputs],
                              [info(n, a) for n, a in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(root, "test_strings_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(tensors):
            t = numpy_helper.from_array(a, n)
            with open(os.path.join(d, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())


def write_cases(root):
    w = WORDS
    n = helper.make_node
    case(root, "identity", n("Identity", ["x"], ["y"]), [("x", w)], [("y", w.copy())])
    shape = np.array([3, 2], np.int64)
    case(root, "reshape", n("Reshape", ["x", "s"], ["y"]), [("x", w), ("s", shape)],
         [("y", w.reshape(3, 2))])
    axes = np.array([0], np.int64)
    case(root, "unsqueeze", n("Unsqueeze", ["x", "a"], ["y"]), [("x", w), ("a", axes)],
         [("y", w[None])])
    case(root, "squeeze", n("Squeeze", ["x", "a"], ["y"]), [("x", w[None]), ("a", axes)],
         [("y", w)])
    case(root, "flatten", n("Flatten", ["x"], ["y"], axis=0), [("x", w)],
         [("y", w.reshape(1, 6))])
    other = np.array([["x", "yy", "zzz"]], dtype=object)
    case(root, "concat_axis0", n("Concat", ["x", "o"], ["y"], axis=0), [("x", w), ("o", other)],
         [("y", np.concatenate([w, other], axis=0))])
    case(root, "concat_axis1", n("Concat", ["x", "x"], ["y"], axis=1), [("x", w)],
         [("y", np.concatenate([w, w], axis=1))])
    idx = np.array([[2, -3], [0, 0]], np.int64)
    case(root, "gather_axis1", n("Gather", ["x", "i"], ["y"], axis=1), [("x", w), ("i", idx)],
         [("y", np.take(w, np.where(idx < 0, idx + 3, idx), axis=1))])
    starts, ends, sax, steps = (np.array(v, np.int64) for v in ([-1], [-4], [1], [-1]))
    case(root, "slice_reversed",
         n("Slice", ["x", "st", "en", "ax", "sp"], ["y"]),
         [("x", w), ("st", starts), ("en", ends), ("ax", sax), ("sp", steps)],
         [("y", w[:, ::-1])])
    row = np.array(["alpha", "", "zeta"], dtype=object)
    case(root, "equal_broadcast", n("Equal", ["x", "r"], ["y"]), [("x", w), ("r", row)],
         [("y", (w == row).astype(bool))])
    cond = np.array([[True], [False]])
    case(root, "where_broadcast", n("Where", ["c", "x", "r"], ["y"]),
         [("c", cond), ("x", w), ("r", row)], [("y", np.where(cond, w, row))])
    case(root, "transpose", n("Transpose", ["x"], ["y"], perm=[1, 0]), [("x", w)],
         [("y", w.T.copy())])
    case(root, "tile", n("Tile", ["x", "r"], ["y"]),
         [("x", w), ("r", np.array([2, 1], np.int64))], [("y", np.tile(w, (2, 1)))])


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as root:
        write_cases(root)
        count = len(os.listdir(root))
        result = subprocess.run([binary, "--data", root, "--verbose"], capture_output=True,
                                text=True, timeout=300)
    print(result.stdout + result.stderr)
    summary = re.search(r"onnx_conformance: (\d+) passed, (\d+) failed, (\d+) skipped",
                        result.stdout)
    if result.returncode != 0 or summary is None or int(summary.group(1)) != count:
        print(f"string_cases: expected all {count} cases to pass")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
