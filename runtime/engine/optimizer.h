// Load-time graph passes: pass-through removal, dead-node removal, constant folding.
#ifndef REPRISE_RUNTIME_ENGINE_OPTIMIZER_H_
#define REPRISE_RUNTIME_ENGINE_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Removes Identity, and Dropout in inference mode (no mask used, training_mode absent or a
/// constant false), rewiring their consumers (and graph outputs) to their input. Returns how
/// many nodes were removed.
int RemovePassThroughNodes(Graph* graph);

/// True for a Dropout that drops nothing: training_mode absent or a constant false, or a
/// constant ratio of 0. Its output is its input and its mask is all true.
bool IsInferenceDropout(const Graph& graph, const Node& node);

/// Removes nodes none of whose outputs is used by another node or a graph output. Returns how
/// many were removed.
int RemoveDeadNodes(Graph* graph);

/// Where a Resize has a constant scale of 1 along an axis whose input size is known or named
/// and whose output size is unknown, the output's size is the input's: ONNX shape inference
/// names it afresh ("unk__0" for a batch named "batch"), so every dim of that name in the graph
/// takes the input's size or name. So does a broadcasting elementwise op's output (Add, Mul, ...)
/// along an axis where all its inputs, of its rank, have one size or name (ONNX names the sum
/// of a "batch" and an "unk__0" afresh too, and they may now be one). Repeated until nothing is
/// learnt (at most 16 passes). Returns how many axes were unified.
int UnifyResizedSymbols(Graph* graph);

/// The most bytes (outputs and workspace) that folding one node may allocate by default.
inline constexpr int64_t kDefaultMaxFoldedBytes = int64_t{1} << 30;

/// True for ops whose result must not be computed ahead of time (random generators).
bool IsNondeterministicOp(absl::string_view op);

/// True for ops whose output sizes follow their input values (NonZero, Compress, Unique,
/// NonMaxSuppression): their kernels compute at plan time, so a model with one is planned for
/// its input values (Model::IsValueKeyCandidate).
bool HasValueDependentShape(absl::string_view op);

/// Runs every deterministic node whose inputs are all constants, on host memory with the
/// kernels of `registry`, and turns its outputs into constants. A node whose kernel refuses the
/// constant inputs is an error naming the node. A node whose outputs and workspace would take
/// more than `max_folded_bytes` is left to run with the plan. Returns how many nodes were folded.
absl::StatusOr<int> FoldConstants(Graph* graph, const KernelRegistry& registry,
                                  int64_t max_folded_bytes = kDefaultMaxFoldedBytes);

/// The standard pipeline for inference: pass-through removal, QDQ patterns into QLinear ops
/// (fusion_qdq.h), dead nodes, folding, dead nodes,
/// then the rewrites of fusion_conv.h (BatchNormalization folding, Conv post-op fusion,
/// blocked layout between fused convolutions), fusion_gemm.h (Gemm epilogues) and
/// fusion_transformer.h (decomposed LayerNorm and GELU, MatMul epilogues).
/// Error when an engine op (e.g. a Dropout in training mode) is left that no kernel runs.
/// `choose_layouts` false leaves the top graph's blocked layouts (KeepBlockedLayoutBetweenConvs)
/// to the caller, which may cut the graph first (value_split.h); subgraphs get theirs here.
absl::Status OptimizeForInference(Graph* graph, const KernelRegistry& registry,
                                  int64_t max_folded_bytes = kDefaultMaxFoldedBytes,
                                  bool choose_layouts = true);

/// Prepares `node`'s kernel for `inputs` and runs it at once into freshly allocated outputs
/// (one per kernel output). For folding at load time and at plan time. INVALID_ARGUMENT when an
/// output's shape is not concrete or the sizes overflow; INTERNAL when a non-string output is
/// stored padded (output_storage_bytes above its dense size: the values are plain).
/// `in_place`, when given, becomes output 0 instead of a new value: its bytes are output 0's
/// dense size and `inputs[0]` points at them (a kernel that updates its first input in place,
/// such as ScatterElements; the caller's value is no longer read by anyone else).
absl::StatusOr<std::vector<TensorValue>> EvaluateOnHost(const PreparedKernel& kernel,
                                                        const std::vector<const void*>& inputs,
                                                        TensorValue* in_place = nullptr);

/// The bytes EvaluateOnHost would allocate for `kernel` (outputs and workspace), checked.
absl::StatusOr<int64_t> HostBytes(const PreparedKernel& kernel);

/// Prepare context for `node` over `inputs` (which the context borrows).
PrepareContext MakePrepareContext(const Node& node, int opset,
                                  const std::vector<TensorDesc>& inputs, int intra_op_threads);

/// Prefixes `status`'s message with the node, e.g. `node "conv1" (Conv): ...`.
absl::Status NodeError(const Node& node, const absl::Status& status);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_OPTIMIZER_H_
