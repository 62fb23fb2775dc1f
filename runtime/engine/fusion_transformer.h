// Load-time rewrites of the patterns transformer exporters emit (opset 13 and earlier have no
// LayerNormalization or Gelu op, so exporters write them out as arithmetic):
//  - ReduceMean / Sub / Pow / ReduceMean / Add(eps) / Sqrt / Div / Mul(gamma) / Add(beta) over
//    the last axis → one LayerNormalization;
//  - x * 0.5 * (1 + Erf(x / sqrt(2))) in its usual orderings, and the tanh form → one Gelu;
//  - MatMul [← Transpose of either operand] [→ Mul/Div by a scalar] [→ Add(constant bias)]
//    [→ Relu | Tanh | Sigmoid | Clip | Gelu] [→ Add(residual)] → one kFusedMatMulOp
//    (kernels/cpu/fused_ops.h).
// Each rewrite needs the replacement op in the registry, and leaves a match alone when an
// intermediate has another use or is a graph output, or a constant is not what the pattern
// needs. All are exact rewrites up to float rounding.
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_TRANSFORMER_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_TRANSFORMER_H_

#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Replaces each decomposed layer normalisation over the last axis by LayerNormalization
/// (axis -1, epsilon from the Add), and each over the channels (both ReduceMeans over axis 1 of
/// an input of rank 3 or more: LayerNorm2d) by kernels::cpu::kFusedChannelNormOp, where
/// `registry` has the op. Accepted forms: the deviation x - mean computed once and used twice,
/// or twice; the square as Pow(d, 2) or Mul(d, d); the division as Div(d, s) or
/// Mul(d, Reciprocal(s)); the Add of beta optional. eps must be a float scalar constant, gamma
/// and beta float constants of one non-unit dimension at most (the normalised size, at the last
/// axis or, right-aligned to x, at axis 1; a channel normalisation needs x's channels known).
/// Returns how many nodes were removed.
int FuseLayerNorm(Graph* graph, const KernelRegistry& registry);

/// Replaces each x * 0.5 * (1 + Erf(x / sqrt(2))) by Gelu(x) (approximate "none"): the
/// division may be a Mul by 1/sqrt(2), and the two products may come in any of the orders
/// (x * (1 + e)) * 0.5, x * ((1 + e) * 0.5), (x * 0.5) * (1 + e). Likewise the tanh form
/// x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) (the cube as Pow(x, 3) or
/// x * (x * x)) becomes Gelu with approximate "tanh". Returns how many nodes were removed.
int FuseGelu(Graph* graph, const KernelRegistry& registry);

/// Fuses each MatMul with what surrounds it into one kernels::cpu::kFusedMatMulOp: on either
/// operand, a Mul or Div by a float scalar constant (into alpha) and, below it, a Transpose
/// whose permutation keeps the stored last axis among the last two (the product reads it in
/// place); then, after the product, in this order a Mul or Div by a float scalar constant (the
/// scale), an Add of a float constant whose dims before the last two are 1 (bias or attention
/// mask; one that could widen the shape stays), Relu / Tanh / Sigmoid / Clip / Gelu, and an Add
/// of a non-constant (residual). A MatMul with nothing to absorb stays. Returns how many nodes
/// were absorbed.
int FuseMatMulEpilogues(Graph* graph, const KernelRegistry& registry);

/// Runs FuseLayerNorm, FuseGelu, then FuseMatMulEpilogues. Returns how many nodes were removed
/// in all.
int FuseTransformerPatterns(Graph* graph, const KernelRegistry& registry);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_TRANSFORMER_H_
