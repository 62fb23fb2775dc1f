// Load-time rewrite: Gemm [→ Relu | Tanh | Sigmoid | Clip] [→ Add(residual)] as one
// kernels::cpu::kFusedGemmOp node (the activation and the add run on the Gemm's output while it
// is in cache, and two steps and two intermediates go).
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_GEMM_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_GEMM_H_

#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Fuses each Gemm with the activation and/or the Add that follow it when `registry` has the
/// fused op. Each intermediate must have exactly one use and not be a graph output; the Add's
/// other operand must not be a constant (a bias-like broadcast stays a plain Add). A Gemm with
/// nothing to absorb is left alone. Returns how many nodes were absorbed.
int FuseGemmEpilogues(Graph* graph, const KernelRegistry& registry);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_GEMM_H_
