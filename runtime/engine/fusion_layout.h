// Load-time rewrite: a chain of ops that only move elements, [Concat →] [Reshape →] Transpose
// [→ Reshape] [→ Slices], as one kernels::cpu::kFusedTransposeOp node, so that the elements move
// once instead of once per op (ShuffleNet's channel shuffle: Concat, Reshape, Transpose,
// Reshape, two Slices per unit; the Reshapes were views already).
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_LAYOUT_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_LAYOUT_H_

#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Fuses each Transpose that keeps its last axis last with the Concat (through an optional
/// Reshape) before it and the Slices (through an optional Reshape) after it, when `registry` has
/// the fused op and there is a Concat or a Slice to absorb. Every inner value must be read only
/// by the chain's next op and by Shape nodes (which become shape_of nodes of the fused op,
/// computed at plan time), and must not be a graph output. Returns how many chains were fused.
int FuseTransposeChains(Graph* graph, const KernelRegistry& registry);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_LAYOUT_H_
