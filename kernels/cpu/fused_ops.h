// Names and attributes of the fused ops that the engine's load-time rewrites produce and the
// CPU kernels run. They live in the internal domain kFusedDomain; no ONNX model names them.
#ifndef REPRISE_KERNELS_CPU_FUSED_OPS_H_
#define REPRISE_KERNELS_CPU_FUSED_OPS_H_

namespace reprise::kernels::cpu {

/// Domain of the fused nodes in the engine's graph.
inline constexpr char kFusedDomain[] = "com.reprise";

/// Conv with oneDNN post-ops: inputs X, W, B (optional), R (optional residual, added to the
/// convolution's output before the activation). Attributes: those of Conv, plus "activation"
/// (string: "" for none, "Relu" or "Clip") with "clip_min" / "clip_max" (floats) for Clip.
/// Y = act(conv(X, W) + B + R).
inline constexpr char kFusedConvOp[] = "com.reprise.FusedConv";

/// Gemm followed by an activation: inputs and attributes of Gemm, plus "activation" (string:
/// "Relu", "Tanh", "Sigmoid", "Clip" with "clip_min" / "clip_max"). Y = act(Gemm(A, B, C)).
inline constexpr char kFusedGemmOp[] = "com.reprise.FusedGemm";

/// MatMul with folded operand transposes and an epilogue: inputs A, B, C (optional constant
/// bias, broadcast to Y), R (optional residual, broadcast to Y). Attributes: "perm_a" /
/// "perm_b" (ints, optional: a Transpose applied to the operand before the product, whose
/// last axis must stay one of the last two), "alpha" (float, default 1), "activation" as for
/// kFusedGemmOp plus "Gelu" (with "approximate": "none" or "tanh").
/// Y = act(alpha * MatMul(perm_a(A), perm_b(B)) + C) + R, with MatMul's broadcasting.
inline constexpr char kFusedMatMulOp[] = "com.reprise.FusedMatMul";

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FUSED_OPS_H_
