// Names and attributes of the fused ops that the engine's load-time rewrites produce and the
// CPU kernels run. They live in the internal domain kFusedDomain; no ONNX model names them.
#ifndef REPRISE_KERNELS_CPU_FUSED_OPS_H_
#define REPRISE_KERNELS_CPU_FUSED_OPS_H_

namespace reprise::kernels::cpu {

/// Domain of the fused nodes in the engine's graph.
inline constexpr char kFusedDomain[] = "com.reprise";

/// Conv with oneDNN post-ops: inputs X, W, B (optional), R (optional residual, added to the
/// convolution's output before the activation, or after it where "sum_after_activation" (int)
/// is 1: Y = act(conv(X, W) + B) + R). Attributes: those of Conv, plus "activation"
/// (string: "" for none, "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
/// "HardSwish", "Swish", x * sigmoid(x), "Gelu", the exact GELU, or "GeluTanh", its tanh
/// approximation) with "clip_min" / "clip_max" (floats) for Clip and
/// "activation_alpha" / "activation_beta" (floats) for LeakyRelu's alpha and HardSigmoid's.
/// Y = act(conv(X, W) + B + R). "x_layout", "y_layout", "r_layout" ("nchw" when absent, "nhwc",
/// "blocked") say how X, Y and R are stored (see onednn_util.h, Storage).
inline constexpr char kFusedConvOp[] = "com.reprise.FusedConv";

/// ConvTranspose followed by an activation: the inputs and attributes of ConvTranspose, plus
/// "activation" and its parameters as kFusedConvOp's (any of its names). Y = act(ConvTranspose(X,
/// W, B)), X and Y plain.
inline constexpr char kFusedConvTransposeOp[] = "com.reprise.FusedConvTranspose";

/// A layer normalisation over the channels (axis 1) of each position of X [N, C, ...] (rank 3
/// or more): Y = (X - mean) / sqrt(var + epsilon) * scale + bias, the mean and variance over C
/// (the variance as the mean of the squared deviations), scale and bias (optional) C values
/// each in any shape; attribute "epsilon" (float). X and Y plain.
inline constexpr char kFusedChannelNormOp[] = "com.reprise.FusedChannelNorm";

/// Gemm followed by an activation: inputs and attributes of Gemm, plus "activation" (string:
/// "Relu", "Tanh", "Sigmoid", "Clip" with "clip_min" / "clip_max"). Y = act(Gemm(A, B, C)).
inline constexpr char kFusedGemmOp[] = "com.reprise.FusedGemm";

/// A 1x1 convolution (Conv's attributes, one group, stride 1, no pads) and its activation
/// ("activation", "clip_min", "clip_max"), followed by a depthwise 3x3 convolution (pads 1,
/// "dw_stride" 1 or 2) and its activation ("dw_activation", "dw_clip_min", "dw_clip_max",
/// "dw_activation_alpha", "dw_activation_beta"):
/// inputs X, W, B (optional), W_dw [C,1,3,3] (constant), B_dw (optional, constant).
/// "x_layout" / "y_layout" as for kFusedConvOp. Large intermediates run as one oneDNN primitive
/// (depthwise post-op), so the expanded tensor never leaves the cache (MobileNet's blocks).
inline constexpr char kFusedConvDwOp[] = "com.reprise.FusedConvDw";

/// MaxPool (2-D, one output, dilations 1) on oneDNN, inside a chain of convolutions: the
/// attributes of MaxPool plus "x_layout" / "y_layout" ("nchw", "nhwc" or "blocked", as for
/// kFusedConvOp), so that X and Y may stay in the convolutions' blocked layout.
inline constexpr char kFusedMaxPoolOp[] = "com.reprise.FusedMaxPool";

/// AveragePool (2-D, dilations 1; ceil_mode only with count_include_pad 0) on oneDNN, inside a
/// chain of convolutions, with "x_layout" / "y_layout" as kFusedMaxPoolOp.
inline constexpr char kFusedAveragePoolOp[] = "com.reprise.FusedAveragePool";

/// Concat of 4-D float32 values along the channels (attribute "axis": 1 or -3) on oneDNN,
/// inside a chain of convolutions: input k stored as "x<k>_layout" and the output as
/// "y_layout" ("nchw", "nhwc" or "blocked", as for kFusedConvOp), so that the values may stay
/// in the convolutions' blocked layout.
inline constexpr char kFusedConcatOp[] = "com.reprise.FusedConcat";

/// A chain of ops that only move elements, in one pass over the elements: Concat of inputs
/// X0..X(k-1) along "axis" (k = "concat_inputs"; 1: no Concat, X0 goes on), Reshape by input S1
/// ("allowzero"), Transpose ("perm", absent: reverse the axes), Reshape by input S2
/// ("allowzero_2"), then "slices" = m Slices (opset 10 form) of the result, each with the four
/// inputs starts, ends, axes and steps (the last two optional) and one output; with m = 0 the one
/// output is the result itself. Inputs: X0..X(k-1), S1, S2 (each absent when its Reshape is),
/// then the slices' inputs. With "shape_of" 0, 1, 2 or 3 (default -1) the node's one output is
/// instead the shape (int64, known at plan time) of the Concat's, the first Reshape's, the
/// Transpose's or the second Reshape's output, from X0..X(k-1) and, where needed, S1 and S2:
/// it stands for a Shape node that read one of the chain's inner values.
inline constexpr char kFusedTransposeOp[] = "com.reprise.FusedTranspose";

/// Resize (inputs and attributes as ONNX's) of a 4-D float32 value inside a chain of
/// convolutions, in H and W only: X and Y stored as "x_layout" and "y_layout" say (the same
/// one: plain, "nhwc" or "blocked"), resize.cc.
inline constexpr char kFusedResizeOp[] = "com.reprise.FusedResize";

/// GlobalAveragePool of a 4-D float32 value inside a chain of convolutions, or of a 3-D one
/// inside a chain of 1-D convolutions: X stored as "x_layout" ("nchw", "nhwc" or "blocked", as
/// for kFusedConvOp); Y plain, [N,C,1,1] ([N,C,1] for 3-D), or [N,C] with "keepdims" 0 (a
/// ReduceMean over every axis after C).
inline constexpr char kFusedGlobalAveragePoolOp[] = "com.reprise.FusedGlobalAveragePool";

/// The same for the maximum (GlobalMaxPool, or a ReduceMax over every axis after C; NaN skipped
/// as in ReduceMax's kernel).
inline constexpr char kFusedGlobalMaxPoolOp[] = "com.reprise.FusedGlobalMaxPool";

/// Y = act(X * S + B) for a 4-D float32 X and one value per channel S and B (optional; each
/// broadcast as Mul broadcasts [N,C,1,1], [1,C,1,1], [C,1,1] or a single value), "activation"
/// "" (none, the default) or "Relu", inside a chain of convolutions: X stored as "x_layout" and
/// Y as "y_layout" (as for kFusedConvOp), S and B plain. A squeeze-and-excitation block's
/// scale, or a BatchNormalization (and its ReLU) that no convolution absorbs.
inline constexpr char kFusedChannelScaleOp[] = "com.reprise.FusedChannelScale";

/// Y = act(X0 + X1) (X0 - X1 with "subtract" 1) of two 4-D float32 values of one shape inside a
/// chain of convolutions: X0 and X1 stored as "x0_layout" and "x1_layout" say and Y as
/// "y_layout", the activation as kFusedConvOp's ("activation" and its parameters). A sum that no
/// convolution absorbs (ConvMixer's residual after a BatchNormalization, a BiFPN's weighted
/// sum and its SiLU).
inline constexpr char kFusedAddOp[] = "com.reprise.FusedAdd";

/// MatMul with folded operand transposes and an epilogue: inputs A, B, C (optional constant
/// bias, broadcast to Y), R (optional residual, broadcast to Y). Attributes: "perm_a" /
/// "perm_b" (ints, optional: a Transpose applied to the operand before the product, whose
/// last axis must stay one of the last two), "alpha" (float, default 1), "activation" as for
/// kFusedGemmOp plus "Gelu" (with "approximate": "none" or "tanh").
/// Y = act(alpha * MatMul(perm_a(A), perm_b(B)) + C) + R, with MatMul's broadcasting.
inline constexpr char kFusedMatMulOp[] = "com.reprise.FusedMatMul";

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FUSED_OPS_H_
