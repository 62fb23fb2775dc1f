#!/usr/bin/python3
"""Single ops against ONNX Runtime: one-op ONNX models over one activation-sized tensor.

    /usr/bin/python3 tools/bench/op_sweep.py [--build-dir build/release] [--reprise-run PATH]
        [--ops Erf,Exp,...] [--shape 1,64,120,160] [--threads 1] [--iterations 15] [--reps 3]
        [--worst N] [--list]

Writes each op's model and input into BUILD/bench/op_sweep (onnx and numpy from
/usr/bin/python3), then times `reprise-run --mode replay` and ONNX Runtime
(tools/bench/ort_run.js, installed into BUILD/ort as broad_zoo.py does) alternately, --reps
times each, pinned like the broad zoo's rows (one CPU at one thread). Prints one line per op,
worst ratio (Reprise / ONNX Runtime, medians over the reps) first. The ops are elementwise
maps, binary ops with a broadcast constant, softmaxes, reductions, normalisations, data
movement and pools: kernels of our own that the model zoos may not exercise, where a scalar
libm loop or a branch per element shows up as a ratio of 2 to 7. onnxruntime-node allocates
each output afresh on every run: where a first write to a fresh page is slow (about 11 us a page
on session 46's VM), ORT's times of the ops with large outputs measure that more than the op
(docs/benchmarks.md, session 46).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_report  # noqa: E402
from run_report import log, run_json, thread_env  # noqa: E402


def op_models(shape):
    """name: (nodes, initializers, output shape, opset, input maker) for the one-op models."""
    import numpy as np
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    n, c, hh, ww = shape

    def const(name, value, dtype=np.float32):
        return nh.from_array(np.asarray(value, dtype=dtype), name)

    def signed(s):
        return (rng.random(s) * 4 - 2).astype(np.float32)

    def positive(s):
        return (rng.random(s) * 4 + 0.1).astype(np.float32)

    def unary(op, make=signed, **attrs):
        return ([h.make_node(op, ["input"], ["output"], **attrs)], [], shape, 17, make)

    models = {op: unary(op) for op in (
        "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Softplus", "Softsign", "Elu", "Selu", "Celu",
        "LeakyRelu", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Abs", "Neg", "Floor",
        "Round", "Sign", "Sin", "Cos", "Atan")}
    models.update({op: unary(op, positive) for op in ("Log", "Sqrt", "Reciprocal")})
    per_channel = [1, c, 1, 1]
    models.update({
        "Pow^2": ([h.make_node("Pow", ["input", "e"], ["output"])], [const("e", 2.0)], shape, 17,
                  signed),
        "Pow^3": ([h.make_node("Pow", ["input", "e"], ["output"])], [const("e", 3.0)], shape, 17,
                  signed),
        "Div[C]": ([h.make_node("Div", ["input", "d"], ["output"])],
                   [const("d", rng.random(per_channel) + 0.5)], shape, 17, signed),
        "Sub[W]": ([h.make_node("Sub", ["input", "d"], ["output"])],
                   [const("d", rng.random([1, 1, 1, ww]))], shape, 17, signed),
        "Where": ([h.make_node("Greater", ["input", "z"], ["g"]),
                   h.make_node("Where", ["g", "input", "z"], ["output"])], [const("z", 0.0)],
                  shape, 17, signed),
        "Softmax(axis 1)": unary("Softmax", axis=1),
        "Softmax(last)": unary("Softmax", axis=-1),
        "LogSoftmax(last)": unary("LogSoftmax", axis=-1),
        "ReduceMean(C)": ([h.make_node("ReduceMean", ["input"], ["output"], axes=[1])], [],
                          [n, 1, hh, ww], 17, signed),
        "ReduceMax(HW)": ([h.make_node("ReduceMax", ["input"], ["output"], axes=[2, 3])], [],
                           [n, c, 1, 1], 17, signed),
        "ArgMax(C)": ([h.make_node("ArgMax", ["input"], ["output"], axis=1)], [],
                      [n, 1, hh, ww], 17, signed),
        "InstanceNorm": ([h.make_node("InstanceNormalization", ["input", "s", "b"], ["output"])],
                         [const("s", rng.random(c)), const("b", rng.random(c))], shape, 17,
                         signed),
        "LayerNorm(last)": ([h.make_node("LayerNormalization", ["input", "s", "b"], ["output"],
                                         axis=-1)],
                            [const("s", rng.random(ww)), const("b", rng.random(ww))], shape, 17,
                            signed),
        "Transpose(NHWC)": ([h.make_node("Transpose", ["input"], ["output"], perm=[0, 2, 3, 1])],
                            [], [n, hh, ww, c], 17, signed),
        "Pad(reflect 2)": ([h.make_node("Pad", ["input", "p"], ["output"], mode="reflect")],
                           [const("p", [0, 0, 2, 2, 0, 0, 2, 2], np.int64)],
                           [n, c, hh + 4, ww + 4], 17, signed),
        "DepthToSpace(2)": ([h.make_node("DepthToSpace", ["input"], ["output"], blocksize=2)], [],
                            [n, c // 4, hh * 2, ww * 2], 17, signed),
        "Resize(nearest 2x)": ([h.make_node("Resize", ["input", "", "s"], ["output"],
                                            mode="nearest",
                                            coordinate_transformation_mode="asymmetric",
                                            nearest_mode="floor")],
                               [const("s", [1, 1, 2, 2])], [n, c, hh * 2, ww * 2], 17, signed),
        "Resize(linear 2x)": ([h.make_node("Resize", ["input", "", "s"], ["output"],
                                           mode="linear")],
                              [const("s", [1, 1, 2, 2])], [n, c, hh * 2, ww * 2], 17, signed),
        "MaxPool(3x3/2)": ([h.make_node("MaxPool", ["input"], ["output"], kernel_shape=[3, 3],
                                        strides=[2, 2], pads=[1, 1, 1, 1])], [],
                           [n, c, (hh - 1) // 2 + 1, (ww - 1) // 2 + 1], 17, signed),
        "MaxPool(5x5/1)": ([h.make_node("MaxPool", ["input"], ["output"], kernel_shape=[5, 5],
                                        pads=[2, 2, 2, 2])], [], shape, 17, signed),
        "GlobalAveragePool": ([h.make_node("GlobalAveragePool", ["input"], ["output"])], [],
                              [n, c, 1, 1], 17, signed),
    })
    models.update(more_models(shape, rng, const, signed))
    return models


def more_models(shape, rng, const, signed):
    """Data movement, reductions, comparisons, pools and convolution forms the zoo lacks."""
    import numpy as np
    from onnx import TensorProto
    from onnx import helper as h

    n, c, hh, ww = shape
    per_channel = [1, c, 1, 1]

    def node(op, inputs, **attrs):
        return h.make_node(op, inputs, ["output"], **attrs)

    def conv(name, cin, cout, k, group=1):
        return const(name, rng.random([cout, cin // group, k, k]) * 0.2 - 0.1)

    half_c = c // 2
    out_w = (ww - 1) // 2 + 1
    return {
        "Clip(-1..1)": ([node("Clip", ["input", "lo", "hi"])], [const("lo", -1.0), const("hi", 1.0)],
                       shape, 17, signed),
        "Max[C]": ([node("Max", ["input", "m"])], [const("m", rng.random(per_channel))], shape, 17,
                   signed),
        "Mul(x*x)": ([node("Mul", ["input", "input"])], [], shape, 17, signed),
        "PRelu[C]": ([node("PRelu", ["input", "s"])], [const("s", rng.random([c, 1, 1]))], shape,
                     17, signed),
        "Ceil": ([node("Ceil", ["input"])], [], shape, 17, signed),
        "Mod(fmod)": ([node("Mod", ["input", "m"], fmod=1)], [const("m", 0.7)], shape, 17, signed),
        "Equal->Cast": ([h.make_node("Greater", ["input", "z"], ["g"]),
                         node("Cast", ["g"], to=TensorProto.FLOAT)], [const("z", 0.0)], shape, 17,
                        signed),
        "Cast(int32)": ([h.make_node("Cast", ["input"], ["i"], to=TensorProto.INT32),
                         node("Cast", ["i"], to=TensorProto.FLOAT)], [], shape, 17, signed),
        "Gather(C)": ([node("Gather", ["input", "i"], axis=1)],
                      [const("i", rng.permutation(c), np.int64)], shape, 17, signed),
        "Slice(W/2)": ([node("Slice", ["input", "b", "e", "a", "st"])],
                       [const("b", [0], np.int64), const("e", [ww], np.int64),
                        const("a", [3], np.int64), const("st", [2], np.int64)],
                       [n, c, hh, out_w], 17, signed),
        "Concat(C)": ([h.make_node("Neg", ["input"], ["m"]), node("Concat", ["input", "m"], axis=1)],
                      [], [n, 2 * c, hh, ww], 17, signed),
        "Split+Add(C)": ([h.make_node("Split", ["input"], ["a", "b"], axis=1),
                          node("Add", ["a", "b"])], [], [n, half_c, hh, ww], 17, signed),
        # A new leading axis of 2 (any batch; [2, c, h, w] broadcast only a batch of 1).
        "Expand(N2)": ([node("Expand", ["input", "s"])],
                       [const("s", [2, n, c, hh, ww], np.int64)], [2, n, c, hh, ww], 17, signed),
        "Tile(H 2x)": ([node("Tile", ["input", "r"])], [const("r", [1, 1, 2, 1], np.int64)],
                          [n, c, 2 * hh, ww], 17, signed),
        "CumSum(W)": ([node("CumSum", ["input", "a"])], [const("a", 3, np.int64)], shape, 17,
                      signed),
        "TopK(W k=5)": ([h.make_node("TopK", ["input", "k"], ["output", "idx"], axis=3)],
                      [const("k", [5], np.int64)], [n, c, hh, 5], 17, signed),
        "TopK(flat k=300)": ([h.make_node("Reshape", ["input", "s"], ["r"]),
                              h.make_node("TopK", ["r", "k"], ["output", "idx"])],
                             [const("s", [n, -1], np.int64), const("k", [300], np.int64)],
                             [n, 300], 17, signed),
        "ReduceSum(HW)": ([node("ReduceSum", ["input", "a"], keepdims=1)],
                           [const("a", [2, 3], np.int64)], [n, c, 1, 1], 17, signed),
        "ReduceL2(C)": ([node("ReduceL2", ["input"], axes=[1])], [], [n, 1, hh, ww], 17, signed),
        "ReduceLogSumExp(W)": ([node("ReduceLogSumExp", ["input"], axes=[3])], [], [n, c, hh, 1],
                               17, signed),
        "AveragePool(3x3/1)": ([node("AveragePool", ["input"], kernel_shape=[3, 3],
                                     pads=[1, 1, 1, 1])], [], shape, 17, signed),
        "AveragePool(2x2/2)": ([node("AveragePool", ["input"], kernel_shape=[2, 2], strides=[2, 2])],
                               [], [n, c, hh // 2, ww // 2], 17, signed),
        "LRN(5)": ([node("LRN", ["input"], size=5)], [], shape, 17, signed),
        "BatchNorm": ([node("BatchNormalization", ["input", "s", "b", "m", "v"])],
                      [const(k, rng.random(c) + 0.5) for k in ("s", "b", "m", "v")], shape, 17,
                      signed),
        "SpaceToDepth(2)": ([node("SpaceToDepth", ["input"], blocksize=2)], [],
                            [n, c * 4, hh // 2, ww // 2], 17, signed),
        "MatMul[WxW]": ([node("MatMul", ["input", "w"])], [const("w", rng.random([ww, ww]) - 0.5)],
                        shape, 17, signed),
        "Conv3x3 g=C/8": ([node("Conv", ["input", "w"], pads=[1, 1, 1, 1], group=c // 8)],
                          [conv("w", c, c, 3, c // 8)], shape, 17, signed),
        "Conv3x3 dil 2": ([node("Conv", ["input", "w"], pads=[2, 2, 2, 2], dilations=[2, 2])],
                          [conv("w", c, c, 3)], shape, 17, signed),
        "Conv7x1": ([node("Conv", ["input", "w"], pads=[3, 0, 3, 0])],
                    [const("w", rng.random([c, c, 7, 1]) * 0.2 - 0.1)], shape, 17, signed),
        "ConvTranspose2x2/2": ([node("ConvTranspose", ["input", "w"], kernel_shape=[2, 2],
                                     strides=[2, 2])],
                               [const("w", rng.random([c, half_c, 2, 2]) * 0.2 - 0.1)],
                               [n, half_c, 2 * hh, 2 * ww], 17, signed),
        "ConvTranspose4x4/2": ([node("ConvTranspose", ["input", "w"], kernel_shape=[4, 4],
                                     strides=[2, 2], pads=[1, 1, 1, 1])],
                               [const("w", rng.random([c, half_c, 4, 4]) * 0.2 - 0.1)],
                               [n, half_c, 2 * hh, 2 * ww], 17, signed),
        "GridSample": ([node("GridSample", ["input", "g"], align_corners=0)],
                       [const("g", rng.random([n, hh, ww, 2]) * 2 - 1)], shape, 17, signed),
        "GroupNorm(8)": ([h.make_node("Reshape", ["input", "s1"], ["r"]),
                          h.make_node("InstanceNormalization", ["r", "one", "zero"], ["i"]),
                          h.make_node("Reshape", ["i", "s2"], ["j"]),
                          h.make_node("Mul", ["j", "g"], ["k"]), node("Add", ["k", "b"])],
                         [const("s1", [n, 8, -1], np.int64), const("one", np.ones(8)),
                          const("zero", np.zeros(8)), const("s2", shape, np.int64),
                          const("g", rng.random(per_channel)), const("b", rng.random(per_channel))],
                         shape, 17, signed),
    }


def write_model(directory, name, spec, shape):
    """BUILD/bench/op_sweep/<file>.onnx and .npy for one op; returns (model, input) paths."""
    import numpy as np
    import onnx
    from onnx import TensorProto
    from onnx import helper as h

    nodes, inits, out_shape, opset, make = spec
    out_type = TensorProto.INT64 if nodes[-1].op_type == "ArgMax" else TensorProto.FLOAT
    outputs = [h.make_tensor_value_info("output", out_type, out_shape)]
    if nodes[-1].op_type == "TopK":
        outputs.append(h.make_tensor_value_info("idx", TensorProto.INT64, out_shape))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                         outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    stem = "".join(ch if ch.isalnum() else "_" for ch in name)
    model_path = os.path.join(directory, stem + ".onnx")
    input_path = os.path.join(directory, stem + ".npy")
    onnx.save(model, model_path)
    np.save(input_path, make(shape))
    return model_path, input_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(run_report.ROOT, "build", "release"))
    parser.add_argument("--reprise-run", help="default: BUILD/tools/reprise-run")
    parser.add_argument("--ops", help="comma-separated subset (names as --list prints them)")
    parser.add_argument("--shape", default="1,64,120,160", help="N,C,H,W of the input")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--reps", type=int, default=3, help="runs per runtime and op")
    parser.add_argument("--worst", type=int, default=0, help="print only the N worst ratios")
    parser.add_argument("--list", action="store_true", help="print the op names and exit")
    args = parser.parse_args()
    shape = [int(d) for d in args.shape.split(",")]
    if len(shape) != 4 or min(shape) < 1 or shape[1] % 8 != 0:
        parser.error("--shape wants N,C,H,W with C a multiple of 8")
    if not (1 <= args.threads <= 256 and 1 <= args.iterations <= 10000 and 1 <= args.reps <= 50):
        parser.error("--threads 1-256, --iterations 1-10000, --reps 1-50")
    models = op_models(shape)
    if args.list:
        print("\n".join(models))
        return 0
    names = [o for o in args.ops.split(",") if o] if args.ops else list(models)
    unknown = [o for o in names if o not in models]
    if unknown:
        parser.error(f"unknown op(s) {', '.join(unknown)}; --list names them")
    build = os.path.abspath(args.build_dir)
    reprise_run = os.path.abspath(args.reprise_run or os.path.join(build, "tools", "reprise-run"))
    if not os.access(reprise_run, os.X_OK):
        sys.exit(f"op_sweep: {reprise_run} is missing; build it or give --reprise-run")
    ort_prefix, ort_version = run_report.install_ort(build)
    directory = os.path.join(build, "bench", "op_sweep")
    os.makedirs(directory, exist_ok=True)
    env = thread_env(args.threads)
    cpus = run_report.row_cpus(args.threads)
    common = ["--iterations", str(args.iterations), "--warmup", "2"]
    rows = []
    for name in names:
        model, x = write_model(directory, name, models[name], shape)
        times = {"reprise": [], "ort": []}
        errors = []
        for _ in range(args.reps):
            r = run_json([reprise_run, "--model", model, "--input", "input=" + x, "--threads",
                          str(args.threads), "--mode", "replay", "--json"] + common,
                         env=env, cpus=cpus)
            o = run_json(run_report.ort_args(ort_prefix, model, x, args.threads, common),
                         env=env, cpus=cpus)
            for key, result in (("reprise", r), ("ort", o)):
                if "median_us" in result:
                    times[key].append(result["median_us"])
                else:
                    errors.append(f"{key}: {result.get('error', '?')[:160]}")
        if errors or not times["reprise"] or not times["ort"]:
            rows.append((float("inf"), name, None, None, "; ".join(errors)))
            log(f"{name}: {errors[0] if errors else 'no runs'}")
            continue
        mine, theirs = statistics.median(times["reprise"]), statistics.median(times["ort"])
        rows.append((mine / theirs, name, mine, theirs, ""))
    rows.sort(key=lambda row: -row[0])
    if args.worst:
        rows = rows[:args.worst]
    print(f"one op over {args.shape} at {args.threads} thread(s), medians of {args.reps} runs of "
          f"{args.iterations} iterations; ONNX Runtime {ort_version}")
    print(f"{'op':<22}{'Reprise us':>12}{'ORT us':>12}{'ratio':>8}")
    for ratio, name, mine, theirs, error in rows:
        if mine is None:
            print(f"{name:<22}{'-':>12}{'-':>12}{'-':>8}  {error}")
        else:
            print(f"{name:<22}{mine:>12.1f}{theirs:>12.1f}{ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
