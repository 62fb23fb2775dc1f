#include "runtime/engine/optimizer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/aligned_buffer.h"
#include "runtime/engine/fusion_conv.h"
#include "runtime/engine/fusion_gemm.h"
#include "runtime/engine/fusion_layout.h"
#include "runtime/engine/fusion_qdq.h"
#include "runtime/engine/fusion_transformer.h"
#include "runtime/engine/fusion_util.h"
#include "runtime/engine/onnx_import.h"

namespace reprise::runtime::engine {
namespace {

// Rewires every use of `from` (node inputs and graph outputs) to `to`.
void ReplaceUses(Graph* graph, int from, int to) {
  for (Node& node : graph->nodes) {
    for (int& in : node.inputs) {
      if (in == from) in = to;
    }
  }
  for (GraphOutput& out : graph->outputs) {
    if (out.value == from) out.value = to;
  }
}

}  // namespace

bool IsInferenceDropout(const Graph& graph, const Node& node) {
  if (node.op != "Dropout" || node.inputs.empty() || node.inputs[0] == Graph::kNoValue) {
    return false;
  }
  if (node.inputs.size() <= 2 || node.inputs[2] == Graph::kNoValue) return true;
  const TensorValue* training = graph.FindConstant(node.inputs[2]);
  if (training == nullptr || training->bytes.empty()) return false;
  if (training->bytes[0] == 0) return true;
  // Training with a constant ratio of 0 drops nothing: the same as inference.
  if (node.inputs[1] == Graph::kNoValue) return false;
  const TensorValue* ratio = graph.FindConstant(node.inputs[1]);
  if (ratio == nullptr || ratio->bytes.empty()) return false;
  if (ratio->dtype == DataType::kFloat32 && ratio->bytes.size() == 4) {
    float r;
    std::memcpy(&r, ratio->bytes.data(), 4);
    return r == 0.0f;
  }
  if (ratio->dtype == DataType::kFloat64 && ratio->bytes.size() == 8) {
    double r;
    std::memcpy(&r, ratio->bytes.data(), 8);
    return r == 0.0;
  }
  return false;
}

int RemovePassThroughNodes(Graph* graph) {
  int removed = 0;
  std::vector<Node> kept;
  kept.reserve(graph->nodes.size());
  std::vector<int> uses = graph->UseCounts();
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    Node& node = graph->nodes[i];
    const bool pass =
        (node.op == "Identity" && node.inputs.size() == 1 && node.inputs[0] != Graph::kNoValue) ||
        (IsInferenceDropout(*graph, node) &&
         (node.outputs.size() < 2 || node.outputs[1] == Graph::kNoValue ||
          uses[node.outputs[1]] == 0));
    if (pass && node.domain.empty() && !node.outputs.empty() &&
        node.outputs[0] != Graph::kNoValue) {
      ReplaceUses(graph, node.outputs[0], node.inputs[0]);
      ++removed;
      continue;
    }
    kept.push_back(std::move(node));
  }
  graph->nodes = std::move(kept);
  return removed;
}

int RemoveDeadNodes(Graph* graph) {
  std::vector<int> uses = graph->UseCounts();
  int removed = 0;
  // Walk backwards so that a chain of dead nodes goes in one pass.
  std::vector<bool> keep(graph->nodes.size(), true);
  for (size_t i = graph->nodes.size(); i-- > 0;) {
    const Node& node = graph->nodes[i];
    bool used = false;
    for (int out : node.outputs) {
      if (out != Graph::kNoValue && uses[out] > 0) used = true;
    }
    if (used) continue;
    keep[i] = false;
    ++removed;
    for (int in : node.inputs) {
      if (in != Graph::kNoValue) --uses[in];
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  graph->nodes = std::move(kept);
  return removed;
}

bool IsNondeterministicOp(absl::string_view op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

bool HasValueDependentShape(absl::string_view op) {
  return op == "NonZero" || op == "Compress" || op == "Unique" || op == "NonMaxSuppression";
}

PrepareContext MakePrepareContext(const Node& node, int opset,
                                  const std::vector<TensorDesc>& inputs, int intra_op_threads) {
  PrepareContext context;
  context.op = node.op;
  context.name = node.name;
  context.opset = opset;
  context.inputs = inputs;
  context.num_outputs = static_cast<int>(node.outputs.size());
  context.attributes = &node.attributes;
  context.intra_op_threads = intra_op_threads;
  return context;
}

absl::Status NodeError(const Node& node, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("node \"", node.name, "\" (", node.op, "): ", status.message()));
}

absl::StatusOr<int64_t> HostBytes(const PreparedKernel& kernel) {
  int64_t total = 0;
  for (size_t i = 0; i < kernel.outputs().size(); ++i) {
    const TensorDesc& desc = kernel.outputs()[i];
    const std::optional<int64_t> count = CheckedElementCount(desc.shape);
    std::optional<int64_t> bytes =
        count.has_value() ? CheckedByteSize(*count, static_cast<int64_t>(DataTypeSize(desc.dtype)))
                          : std::nullopt;
    // A padded layout, or a string output with its strings' storage, may take more.
    if (bytes.has_value() &&
        kernel.output_storage_bytes(i) > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
      bytes = std::nullopt;
    } else if (bytes.has_value()) {
      bytes = std::max(*bytes, static_cast<int64_t>(kernel.output_storage_bytes(i)));
    }
    if (!bytes.has_value() || !CheckedAdd(total, *bytes, &total)) {
      return absl::InvalidArgumentError(absl::StrCat(kernel.op(), ": output shape ",
                                                     ShapeToString(desc.shape),
                                                     " is not concrete or too large"));
    }
  }
  if (kernel.workspace_bytes() > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ||
      !CheckedAdd(total, static_cast<int64_t>(kernel.workspace_bytes()), &total)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel.op(), ": workspace of ", kernel.workspace_bytes(), " bytes"));
  }
  return total;
}

absl::StatusOr<std::vector<TensorValue>> EvaluateOnHost(const PreparedKernel& kernel,
                                                        const std::vector<const void*>& inputs,
                                                        TensorValue* in_place) {
  RETURN_IF_ERROR(HostBytes(kernel).status());
  const size_t count = kernel.outputs().size();
  std::vector<TensorValue> outputs(count);
  // Strings (their views point into the buffer, and are copied out of it) and empty outputs (a
  // kernel gets a valid address for each output) go through a buffer; the others are written
  // straight into their value's bytes.
  std::vector<AlignedBuffer> buffers(count);
  std::vector<void*> out_ptrs;
  for (size_t i = 0; i < count; ++i) {
    const TensorDesc& desc = kernel.outputs()[i];
    const size_t dense = static_cast<size_t>(NumElements(desc.shape)) * DataTypeSize(desc.dtype);
    if (desc.dtype != DataType::kString && kernel.output_storage_bytes(i) > dense) {
      // A value computed here is plain (TensorValue's bytes are row-major); a padded storage
      // (channel blocks) would be cut to the dense size and misread by every reader.
      return absl::InternalError(absl::StrCat(
          kernel.op(), ": output ", i, " is stored in ", kernel.output_storage_bytes(i),
          " bytes, not the ", dense, " of a plain value; it cannot be computed at plan time"));
    }
    if (i == 0 && in_place != nullptr) {
      if (desc.dtype == DataType::kString || in_place->dtype != desc.dtype ||
          in_place->bytes.size() != dense || dense == 0 || inputs.empty() ||
          inputs[0] != in_place->bytes.data()) {
        return absl::InternalError(
            absl::StrCat(kernel.op(), ": output 0 cannot be written over ", "its first input"));
      }
      outputs[0] = std::move(*in_place);
      outputs[0].shape = desc.shape;
      out_ptrs.push_back(outputs[0].bytes.data());
      continue;
    }
    if (desc.dtype != DataType::kString && dense > 0) {
      outputs[i].dtype = desc.dtype;
      outputs[i].shape = desc.shape;
      outputs[i].bytes.resize(dense);
      out_ptrs.push_back(outputs[i].bytes.data());
      continue;
    }
    ASSIGN_OR_RETURN(buffers[i],
                     AlignedBuffer::Allocate(std::max(dense, kernel.output_storage_bytes(i))));
    out_ptrs.push_back(buffers[i].data());
  }
  ASSIGN_OR_RETURN(AlignedBuffer workspace, AlignedBuffer::Allocate(kernel.workspace_bytes()));
  KernelArgs args;
  args.inputs = inputs.data();
  args.outputs = out_ptrs.data();
  args.workspace = kernel.workspace_bytes() > 0 ? workspace.data() : nullptr;
  RETURN_IF_ERROR(kernel.Run(args));
  for (size_t i = 0; i < count; ++i) {
    if (buffers[i].data() == nullptr) continue;  // written in place
    const TensorDesc& desc = kernel.outputs()[i];
    outputs[i] = CopyTensorValue(desc.dtype, desc.shape, buffers[i].data());
  }
  return outputs;
}

absl::StatusOr<int> FoldConstants(Graph* graph, const KernelRegistry& registry,
                                  int64_t max_folded_bytes) {
  int folded = 0;
  std::vector<Node> kept;
  for (Node& node : graph->nodes) {
    bool all_constant = !node.inputs.empty() && !IsNondeterministicOp(node.op);
    for (int in : node.inputs) {
      if (in != Graph::kNoValue && !graph->IsConstant(in)) all_constant = false;
    }
    if (!all_constant || !registry.Has(node.op)) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<TensorDesc> descs;
    std::vector<const void*> ptrs;
    for (int in : node.inputs) {
      TensorDesc desc;
      if (in == Graph::kNoValue) {
        desc.present = false;
        ptrs.push_back(nullptr);
      } else {
        const TensorValue* value = graph->FindConstant(in);
        desc.dtype = value->dtype;
        desc.shape = value->shape;
        desc.data = value->bytes.data();
        ptrs.push_back(value->bytes.data());
      }
      descs.push_back(std::move(desc));
    }
    PrepareContext context = MakePrepareContext(node, graph->opset, descs, 1);
    context.run_once = true;
    auto kernel = registry.Prepare(context);
    if (!kernel.ok()) return NodeError(node, kernel.status());
    auto host_bytes = HostBytes(**kernel);
    if (!host_bytes.ok()) return NodeError(node, host_bytes.status());
    if (*host_bytes > max_folded_bytes) {
      // Too large to compute at load time (a model file can declare any size): the node stays
      // and runs with the plan, whose arena limits apply.
      kept.push_back(std::move(node));
      continue;
    }
    auto outputs = EvaluateOnHost(**kernel, ptrs);
    if (!outputs.ok()) return NodeError(node, outputs.status());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int out = node.outputs[i];
      if (out == Graph::kNoValue) continue;
      if (i >= outputs->size()) {
        return NodeError(node, absl::InternalError(absl::StrCat(
                                   "the kernel produces ", outputs->size(), " outputs, output ", i,
                                   " (\"", graph->values[out].name, "\") is used")));
      }
      graph->values[out].dtype = (*outputs)[i].dtype;
      graph->constants[out] = std::make_unique<TensorValue>(std::move((*outputs)[i]));
    }
    ++folded;
  }
  graph->nodes = std::move(kept);
  return folded;
}

namespace {

// The size of Y's dim `k` is `from`'s: every unknown dim named like it takes `from` (or just
// this one, when unnamed). False when there is nothing to learn.
bool Unify(Graph* graph, int y, size_t k, const Dim& from) {
  const Dim to = graph->values[y].dims[k];
  if (to.known() || (!from.known() && (from.symbol.empty() || from.symbol == to.symbol))) {
    return false;
  }
  if (to.symbol.empty()) {
    graph->values[y].dims[k] = from;
    return true;
  }
  for (Value& v : graph->values) {
    for (Dim& d : v.dims) {
      if (!d.known() && d.symbol == to.symbol) d = from;
    }
  }
  return true;
}

// A Resize's axis of constant scale 1: Y's size is X's.
int UnifyResize(Graph* graph, const Node& node) {
  if (node.inputs.size() < 3 || node.inputs[0] == Graph::kNoValue ||
      node.inputs[2] == Graph::kNoValue) {
    return 0;
  }
  const TensorValue* scales = graph->FindConstant(node.inputs[2]);
  const Value& x = graph->values[node.inputs[0]];
  const size_t rank = graph->values[node.outputs[0]].dims.size();
  if (scales == nullptr || scales->dtype != DataType::kFloat32 || !x.has_shape ||
      x.dims.size() != rank || scales->bytes.size() != rank * sizeof(float)) {
    return 0;
  }
  int unified = 0;
  for (size_t k = 0; k < rank; ++k) {
    float scale = 0.0f;
    std::memcpy(&scale, scales->bytes.data() + k * sizeof(float), sizeof(float));
    const Dim from = graph->values[node.inputs[0]].dims[k];
    if (scale == 1.0f && Unify(graph, node.outputs[0], k, from)) ++unified;
  }
  return unified;
}

// A broadcasting elementwise op whose inputs all have Y's rank and, along an axis, the same
// known size or name: Y's size there is theirs.
int UnifyElementwise(Graph* graph, const Node& node) {
  const size_t rank = graph->values[node.outputs[0]].dims.size();
  int unified = 0;
  for (size_t k = 0; k < rank; ++k) {
    std::optional<Dim> common;
    bool same = !node.inputs.empty();
    for (int in : node.inputs) {
      if (in == Graph::kNoValue || !graph->values[in].has_shape ||
          graph->values[in].dims.size() != rank) {
        same = false;
        break;
      }
      const Dim d = graph->values[in].dims[k];
      if (!common.has_value()) {
        common = d;
      } else if (d.known() != common->known() || d.value != common->value ||
                 (!d.known() && (d.symbol.empty() || d.symbol != common->symbol))) {
        same = false;
      }
    }
    if (same && common.has_value() && Unify(graph, node.outputs[0], k, *common)) ++unified;
  }
  return unified;
}

}  // namespace

int UnifyResizedSymbols(Graph* graph) {
  static constexpr absl::string_view kElementwise[] = {"Add", "Sub", "Mul",  "Div", "Max",
                                                       "Min", "Sum", "Mean", "Pow"};
  int total = 0;
  for (int pass = 0; pass < 16; ++pass) {  // each pass follows the names one op further
    int unified = 0;
    for (const Node& node : graph->nodes) {
      if (!fusion::IsDefaultDomain(node) || node.outputs.empty() ||
          node.outputs[0] == Graph::kNoValue || !graph->values[node.outputs[0]].has_shape) {
        continue;
      }
      if (node.op == "Resize") {
        unified += UnifyResize(graph, node);
      } else if (std::find(std::begin(kElementwise), std::end(kElementwise), node.op) !=
                 std::end(kElementwise)) {
        unified += UnifyElementwise(graph, node);
      }
    }
    total += unified;
    if (unified == 0) break;
  }
  return total;
}

absl::Status OptimizeForInference(Graph* graph, const KernelRegistry& registry,
                                  int64_t max_folded_bytes, bool choose_layouts) {
  for (Node& node : graph->nodes) {
    for (Subgraph& subgraph : node.subgraphs) {
      absl::Status status = OptimizeForInference(subgraph.graph.get(), registry, max_folded_bytes);
      if (!status.ok()) {
        return NodeError(node, absl::Status(status.code(), absl::StrCat(subgraph.attribute, ": ",
                                                                        status.message())));
      }
    }
  }
  RemovePassThroughNodes(graph);
  // Before folding, which would turn the weights' DequantizeLinear into float weights.
  FuseQdqIntoQLinearOps(graph, registry);
  RemoveDeadNodes(graph);
  RETURN_IF_ERROR(FoldConstants(graph, registry, max_folded_bytes).status());
  RemoveDeadNodes(graph);
  // After folding, which makes the Resizes' scales constants; before the fusions that compare
  // shapes (a sum of two chain values fuses only when their shapes are the same).
  UnifyResizedSymbols(graph);
  // After folding, which makes the Pads' pads constants.
  FoldPadIntoConvAndPool(graph);
  RETURN_IF_ERROR(FoldBatchNormIntoConv(graph).status());
  // GELU written out (Erf or Tanh) becomes one node first, so that a conv can take it as its
  // activation.
  FuseGelu(graph, registry);
  FuseConvPostOps(graph, registry);
  FuseConvTransposeActivations(graph, registry);
  FuseGemmEpilogues(graph, registry);
  // Transformer patterns: decomposed LayerNorm and GELU, MatMul epilogues.
  FuseTransformerPatterns(graph, registry);
  FuseDepthwiseIntoPointwise(graph, registry);
  // Concat, Transpose and Slice chains (a channel shuffle) move their elements once. Before the
  // chain passes below, so that a shuffle's Concat is its chain's, not a fused concatenation
  // (ShuffleNet's read a convolution: shufflenet_v2 was 2-7 % slower the other way round).
  FuseTransposeChains(graph, registry);
  // A fused concatenation lets the pooling after it join the chain, and a fused pooling lets
  // the concatenation (or pooling) it feeds join: repeat until neither rewrites (each rewrites a
  // node once).
  // A channel scale (squeeze-and-excitation) passes the chain on in the same way.
  while (FuseConcatIntoConvChains(graph, registry) + FusePoolsIntoConvChains(graph, registry) +
             FuseChannelOpsIntoConvChains(graph, registry) >
         0) {
  }
  if (choose_layouts) KeepBlockedLayoutBetweenConvs(graph);
  for (const Node& node : graph->nodes) {
    // A Dropout left here has its mask used: the planner makes the mask (all true).
    if (IsEngineOp(node.op) && !IsControlFlowOp(node.op) && !registry.Has(node.op) &&
        !IsInferenceDropout(*graph, node)) {
      return NodeError(node, absl::UnimplementedError(
                                 "only inference is supported (training_mode must be absent or "
                                 "a constant false)"));
    }
  }
  return graph->Validate();
}

}  // namespace reprise::runtime::engine
