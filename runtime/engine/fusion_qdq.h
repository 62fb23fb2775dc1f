// Load-time rewrite of QDQ models (quantize_qdq.py's form, and other tools'): a Conv, MatMul or
// Gemm whose inputs are dequantized and whose output is quantized again runs as one
// QLinearConv / QLinearMatMul on the 8-bit values, instead of DequantizeLinear steps, a float32
// op and a QuantizeLinear step.
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_QDQ_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_QDQ_H_

#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Rewrites, when `registry` has the QLinear op,
///
///   DequantizeLinear(xq, xs, xz) ─┐
///   DequantizeLinear(Wq, ws, wz) ─┴→ Conv(·, ·, B?) [→ Relu | Clip] → QuantizeLinear(·, ys, yz)
///
/// into QLinearConv(xq, xs, xz, Wq, ws, wz, ys, yz, B_int32) with
/// B_int32[c] = round(B[c] / (xs * ws[c])), and the same around MatMul, and around Gemm
/// (alpha 1, transA 0, no C; transB=1 transposes Wq at load), into QLinearMatMul.
///
/// Conditions (anything else is left alone): xs, xz, ys, yz one element each; Wq, ws, wz and
/// B constants; ws and wz one element or one per output channel (W's axis 0 for Conv, the last
/// axis of a 2-D B for MatMul, B's output axis for Gemm); scales finite and > 0; xz and wz
/// present or, for Wq only, absent (a zero of Wq's type is made); the Conv's (and Relu's)
/// output read only by the next node of the pattern and not a graph output; a quantized bias
/// that fits int32. A Relu, or a Clip with constant bounds, is absorbed only when it changes
/// nothing after quantization: QuantizeLinear of its bounds gives the lowest and the highest
/// value of y's type (Relu: yz is the lowest; MobileNet's Clip(0, 6): also 6 / ys rounds to
/// the top or beyond). Other bounds would need a clamp the QLinear ops do not have. The
/// DequantizeLinear nodes stay when
/// other nodes read their outputs (dead-node removal drops the others).
/// Call it before constant folding, which would turn Wq's DequantizeLinear into float weights.
/// Returns how many patterns were rewritten.
int FuseQdqIntoQLinearOps(Graph* graph, const KernelRegistry& registry);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_QDQ_H_
