#!/usr/bin/python3
"""Quantizes a float ONNX model (opset 13-17) into QDQ form, for the engine's quantized path.

Every Conv, Gemm and MatMul is rewritten so that it reads quantized values:

  * its float weight initializer (Conv's W, Gemm's and MatMul's B) becomes an int8 initializer
    followed by DequantizeLinear: symmetric (zero point 0, values in [-127, 127]) with one scale
    per output channel (axis 0 of a Conv weight; axis 0 of Gemm's B with transB=1, otherwise its
    last axis, as for MatMul's B);
  * each of its float activation inputs goes through QuantizeLinear -> DequantizeLinear: uint8,
    asymmetric, one scale and zero point for the tensor, from the range [min(0, lo), max(0, hi)]
    seen on random calibration inputs. A tensor read by several such nodes is quantized once.

Biases stay float, as does everything else. The calibration ranges come from the engine itself:
reprise-run runs a copy of the float model in which each tensor to calibrate is also a graph
output (onnx 1.12 has no reference evaluator, and there is no onnxruntime here). The calibration
inputs are standard normal, from a fixed seed, so the output is deterministic.

    /usr/bin/python3 tools/models/quantize_qdq.py --model IN.onnx --out OUT.onnx
        [--reprise-run PATH] [--calibration-samples 8] [--seed 20]

A dynamic input dimension is the batch (the calibration samples); the model must have one input.
Prints the node counts of the result. Uses only onnx and numpy.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

DEFAULT_REPRISE_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                   "build", "release", "tools", "reprise-run")
QUANTIZED_OPS = ("Conv", "Gemm", "MatMul")


def weight_axis(node, rank):
    """The axis of the output channels of the weight input of `node` (rank: the weight's)."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return rank - 1  # MatMul: B is [..., K, N]


def quantize_weight(w, axis):
    """Symmetric int8 per channel along `axis`: returns (q, scales)."""
    moved = np.moveaxis(w.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)
    peak = np.abs(moved).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = w.shape[axis]
    q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


def activation_params(lo, hi):
    """uint8 asymmetric scale and zero point for the range [lo, hi] (widened to hold 0)."""
    lo, hi = min(0.0, float(lo)), max(0.0, float(hi))
    scale = (hi - lo) / 255.0
    if scale == 0.0:
        return np.float32(1.0), np.uint8(0)
    scale = np.float32(scale)
    zero = np.uint8(np.clip(np.round(-lo / float(scale)), 0, 255))
    return scale, zero


def quantized_inputs(node, float_weights):
    """The inputs of `node` to quantize: [(index, is_weight)]. float_weights: the names of the
    float initializers that are not also graph inputs."""
    if node.op_type not in QUANTIZED_OPS:
        return []
    # Conv reads X (activation) and W; Gemm and MatMul read A and B, either may be an activation.
    activation_slots = (0,) if node.op_type == "Conv" else (0, 1)
    picked = []
    for i, name in enumerate(node.input[:2]):
        if not name:
            continue
        if name in float_weights:
            if i == 1:  # W or B: a weight; a constant A stays float
                picked.append((i, True))
        elif i in activation_slots:
            picked.append((i, False))
    return picked


def plan(model):
    """Which weights and activations to quantize: ({weight name: axis}, [activation names])."""
    graph = model.graph
    graph_inputs = {i.name for i in graph.input}
    inits = {t.name: t for t in graph.initializer}
    float_weights = {n for n, t in inits.items()
                     if t.data_type == TensorProto.FLOAT and n not in graph_inputs}
    weights, activations = {}, []
    for node in graph.node:
        for i, is_weight in quantized_inputs(node, float_weights):
            name = node.input[i]
            if is_weight:
                axis = weight_axis(node, len(inits[name].dims))
                if weights.setdefault(name, axis) != axis:
                    raise ValueError(f"weight {name!r} is read along two different axes")
            elif name not in activations:
                activations.append(name)
    return weights, activations


def calibrate(model, names, reprise_run, samples, seed):
    """{name: (min, max)} of each tensor in `names`, from one run of reprise-run on `samples`
    standard normal inputs."""
    init_names = {t.name for t in model.graph.initializer}
    feeds = [i for i in model.graph.input if i.name not in init_names]
    if len(feeds) != 1:
        raise ValueError(f"calibration needs a model with one input, this one has {len(feeds)}")
    inp = feeds[0]
    dims = [d.dim_value if d.HasField("dim_value") else samples
            for d in inp.type.tensor_type.shape.dim]
    if inp.type.tensor_type.elem_type != TensorProto.FLOAT:
        raise ValueError(f"input {inp.name!r} is not float")
    x = np.random.RandomState(seed).standard_normal(dims).astype(np.float32)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    # Each tensor leaves flattened (only its range matters) under a plain name: reprise-run names
    # its files after the outputs, and graph names hold '/'. The flat shape needs no inference.
    flat = "calibration_flat_shape"
    probe.graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), flat))
    outputs = {}
    for k, name in enumerate(names):
        if name == inp.name:
            continue
        out = f"calibration_{k}"
        probe.graph.node.append(helper.make_node("Reshape", [name, flat], [out]))
        probe.graph.output.append(
            helper.make_tensor_value_info(out, TensorProto.FLOAT, [f"calibration_{k}_size"]))
        outputs[name] = out
    ranges = {}
    if inp.name in names:
        ranges[inp.name] = (float(x.min()), float(x.max()))
    with tempfile.TemporaryDirectory() as tmp:
        probe_path = os.path.join(tmp, "probe.onnx")
        onnx.save(probe, probe_path)
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        out_dir = os.path.join(tmp, "out")
        cmd = [reprise_run, "--model", probe_path, "--input", f"{inp.name}={x_path}",
               "--output-dir", out_dir, "--iterations", "1", "--warmup", "0"]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"calibration run failed ({' '.join(cmd)}):\n{result.stderr}")
        for name, out in outputs.items():
            y = np.load(os.path.join(out_dir, out + ".npy"))
            ranges[name] = (float(y.min()), float(y.max()))
    return ranges


def quantize(model, ranges, weights):
    """Returns the QDQ model: `weights` ({name: axis}) as int8 + DequantizeLinear, each tensor of
    `ranges` ({name: (min, max)}) through QuantizeLinear -> DequantizeLinear where the quantized
    ops read it."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    new_inits, new_nodes = [], []
    replaced = {}  # float tensor name -> its dequantized name
    pending = {}  # float tensor name -> the nodes that produce its dequantized copy

    for name, axis in weights.items():
        q, scales = quantize_weight(numpy_helper.to_array(inits[name]), axis)
        new_inits += [numpy_helper.from_array(q, name + "_quantized"),
                      numpy_helper.from_array(scales, name + "_scale"),
                      numpy_helper.from_array(np.zeros(scales.shape, np.int8),
                                              name + "_zero_point")]
        pending[name] = [helper.make_node(
            "DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
            [name + "_dequantized"], name=name + "_DequantizeLinear", axis=axis)]
        replaced[name] = name + "_dequantized"
    for name, (lo, hi) in ranges.items():
        scale, zero = activation_params(lo, hi)
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), name + "_scale"),
                      numpy_helper.from_array(np.array(zero, np.uint8), name + "_zero_point")]
        pending[name] = [
            helper.make_node("QuantizeLinear", [name, name + "_scale", name + "_zero_point"],
                             [name + "_quantized"], name=name + "_QuantizeLinear"),
            helper.make_node("DequantizeLinear",
                             [name + "_quantized", name + "_scale", name + "_zero_point"],
                             [name + "_dequantized"], name=name + "_DequantizeLinear")]
        replaced[name] = name + "_dequantized"

    graph_inputs = {i.name for i in graph.input}
    float_weights = {n for n, t in inits.items()
                     if t.data_type == TensorProto.FLOAT and n not in graph_inputs}
    for original in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        for i, _ in quantized_inputs(node, float_weights):
            name = node.input[i]
            # The Q/DQ nodes go right before the first reader (the producer ran already).
            new_nodes += pending.pop(name, [])
            node.input[i] = replaced[name]
        new_nodes.append(node)

    still_read = {name for node in new_nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name not in weights or t.name in still_read]
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    return model


def quantize_file(model_path, out_path, reprise_run=DEFAULT_REPRISE_RUN, samples=8, seed=20):
    """Reads a float model, writes its QDQ form; returns the node counts {op type: count}."""
    model = onnx.load(model_path)
    opsets = {o.domain: o.version for o in model.opset_import}
    opset = opsets.get("", opsets.get("ai.onnx"))
    if opset is None or not 13 <= opset <= 17:
        raise ValueError(f"{model_path}: opset {opset}, expected 13 to 17 (per-axis "
                         "DequantizeLinear needs 13)")
    weights, activations = plan(model)
    ranges = calibrate(model, activations, reprise_run, samples, seed)
    qdq = quantize(model, ranges, weights)
    onnx.checker.check_model(qdq)
    tmp = out_path + ".tmp"
    onnx.save(qdq, tmp)
    os.replace(tmp, out_path)
    return collections.Counter(n.op_type for n in qdq.graph.node)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the float model")
    parser.add_argument("--out", required=True, help="where to write the QDQ model")
    parser.add_argument("--reprise-run", default=DEFAULT_REPRISE_RUN,
                        help="the reprise-run binary used for calibration (default: %(default)s)")
    parser.add_argument("--calibration-samples", type=int, default=8,
                        help="random inputs (the batch of the dynamic dimension)")
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    counts = quantize_file(args.model, args.out, args.reprise_run, args.calibration_samples,
                           args.seed)
    print(f"quantize_qdq: wrote {args.out}: " +
          ", ".join(f"{op} {n}" for op, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
