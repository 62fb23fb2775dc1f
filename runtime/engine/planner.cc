// ExecutionPlan::Create: shape propagation, plan-time evaluation, memory plan, binding.
#include <algorithm>
#include <cstring>
#include <new>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/output_clearing.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/branch_plan.h"
#include "runtime/engine/control_flow.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/fusion_conv.h"
#include "runtime/engine/memory_plan.h"
#include "runtime/engine/optimizer.h"

namespace reprise::runtime::engine {
namespace {

// Where a value lives in the plan.
enum class Where { kNone, kKnown, kInput, kArena, kOutput };

struct Slot {
  Where where = Where::kNone;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  const void* known = nullptr;  // kKnown: the value
  int index = -1;               // kInput: input; kArena: arena buffer; kOutput: output buffer
  size_t offset = 0;            // kArena: bytes into the buffer (a piece of a concatenation)
  int producer = -1;            // kArena: the step that writes the value
};

size_t ByteSize(DataType dtype, const Shape& shape) {
  return static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype);
}

// ByteSize for a shape not yet known to be sane (a kernel's declared output, an input).
std::optional<int64_t> CheckedBytes(DataType dtype, const Shape& shape) {
  std::optional<int64_t> count = CheckedElementCount(shape);
  if (!count.has_value()) return std::nullopt;
  return CheckedByteSize(*count, static_cast<int64_t>(DataTypeSize(dtype)));
}

// A value known at plan time is stored plain (TensorValue's bytes are row-major), whatever
// storage the layout pass gave it for the run (KeepBlockedLayoutBetweenConvs). A value-keyed
// plan computes whole chains of fused convolutions here (a detection model's backbone before
// its NonMaxSuppression): a node reads each known input plain and, when it is computed here
// (`folded`), writes plain. Returns the node with those layout attributes set to "nchw", or
// nullopt when it has none to change.
std::optional<Node> PlainWhereKnown(const Node& node, const std::vector<TensorDesc>& inputs,
                                    bool folded) {
  std::optional<Node> plain;
  auto make_plain = [&](const std::string& attribute) {
    if (attribute.empty()) return;  // an input read plain always
    absl::StatusOr<std::string> layout = node.attributes.GetString(attribute, "nchw");
    if (layout.ok() && *layout == "nchw") return;
    if (!plain.has_value()) plain = node;
    plain->attributes.Set(attribute, std::string("nchw"));
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].data != nullptr) make_plain(InputLayoutAttribute(node, k));
  }
  if (folded) make_plain("y_layout");
  return plain;
}

absl::Status CheckInputShape(const Value& value, const Shape& shape,
                             absl::flat_hash_map<std::string, int64_t>* symbols) {
  auto mismatch = [&]() {
    return absl::InvalidArgumentError(absl::StrCat("input \"", value.name, "\" has shape ",
                                                   ShapeToString(shape), ", expected ",
                                                   DimsToString(value.dims)));
  };
  for (int64_t d : shape) {
    if (d < 0) return mismatch();
  }
  if (!value.has_shape) return absl::OkStatus();
  if (shape.size() != value.dims.size()) return mismatch();
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& dim = value.dims[i];
    if (dim.known() && dim.value != shape[i]) return mismatch();
    if (!dim.known() && !dim.symbol.empty()) {
      auto [it, inserted] = symbols->emplace(dim.symbol, shape[i]);
      if (!inserted && it->second != shape[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("input \"", value.name, "\" has shape ", ShapeToString(shape),
                         ", expected ", DimsToString(value.dims), " with ", dim.symbol, "=",
                         it->second, " as in an earlier input"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const void* KnownData(const TensorValue& value) {
  alignas(64) static const uint8_t kEmpty[64] = {};
  return value.bytes.empty() ? static_cast<const void*>(kEmpty) : value.bytes.data();
}

/// Builds one ExecutionPlan; lives only during ExecutionPlan::Create.
class PlanBuilder {
 public:
  PlanBuilder(const Graph& graph, const KernelRegistry& registry, const PlanOptions& options)
      : graph_(graph), registry_(registry), options_(options), plan_(new ExecutionPlan()) {
    slots_.resize(graph.values.size());
  }

  absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(
      const std::vector<Shape>& input_shapes, const std::vector<const TensorValue*>& fixed) {
    RETURN_IF_ERROR(SetInputs(input_shapes));
    RETURN_IF_ERROR(FixInputs(fixed));
    for (const auto& [id, tensor] : graph_.constants) {
      slots_[id] = Slot{Where::kKnown, tensor->dtype, tensor->shape, KnownData(*tensor), -1};
    }
    CountUses();
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      computed_now_ = false;
      RETURN_IF_ERROR(PlanNode(graph_.nodes[i]));
      ReleaseDeadValues(graph_.nodes[i]);
    }
    RETURN_IF_ERROR(SetOutputs());
    ViewConcatenationsOfPlacedPieces();
    // String views are copied from value to value (Gather, Concat, Reshape, ...) while their
    // bytes stay where they were made (e.g. in a Cast's output storage): every string buffer
    // of the arena lives to the end of the run, whoever reads it last.
    for (size_t index : string_buffers_) {
      lifetimes_[index].last =
          std::max<int>(lifetimes_[index].last, static_cast<int>(plan_->steps_.size()) - 1);
    }
    std::vector<BufferLane> lanes = PlanRegions();
    WriteOutputsOverInputs(lanes);
    MemoryPlan memory = PlanMemory(lifetimes_, lanes);
    plan_->arena_bytes_ = memory.arena_bytes;
    plan_->intermediate_bytes_ = memory.total_bytes;
    plan_->owned_bytes_ = static_cast<size_t>(owned_);
    plan_->intra_op_threads_ = std::max(1, options_.intra_op_threads);
    RETURN_IF_ERROR(Reserve(static_cast<int64_t>(memory.arena_bytes), "the arena"));
    ASSIGN_OR_RETURN(AlignedBuffer arena, AlignedBuffer::Allocate(memory.arena_bytes));
    plan_->arena_ = std::make_shared<AlignedBuffer>(std::move(arena));
    Bind(memory);
    ClearLargeBuffers();
    return std::move(plan_);
  }

 private:
  absl::Status SetInputs(const std::vector<Shape>& input_shapes) {
    if (input_shapes.size() != graph_.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the model has ", graph_.inputs.size(),
                                                     " inputs, ", input_shapes.size(),
                                                     " shapes given"));
    }
    absl::flat_hash_map<std::string, int64_t> symbols;
    if (!options_.input_dtypes.empty() && options_.input_dtypes.size() != graph_.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the graph has ", graph_.inputs.size(),
                                                     " inputs, ", options_.input_dtypes.size(),
                                                     " input types given"));
    }
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
      Value value = graph_.values[graph_.inputs[i]];
      if (!options_.input_dtypes.empty()) value.dtype = options_.input_dtypes[i];
      if (DataTypeSize(value.dtype) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("input \"", value.name, "\" has no element type"));
      }
      if (options_.input_shapes_are_hints) {
        // The rank only (a subgraph's formal and outer inputs).
        if (value.has_shape && value.dims.size() != input_shapes[i].size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "input \"", value.name, "\" has shape ", ShapeToString(input_shapes[i]),
              ", expected rank ", value.dims.size(), " (", DimsToString(value.dims), ")"));
        }
      } else {
        RETURN_IF_ERROR(CheckInputShape(value, input_shapes[i], &symbols));
      }
      std::optional<int64_t> bytes = CheckedBytes(value.dtype, input_shapes[i]);
      if (!bytes.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("input \"", value.name, "\" shape ",
                                                       ShapeToString(input_shapes[i]),
                                                       " overflows a 64-bit byte count"));
      }
      RETURN_IF_ERROR(Reserve(*bytes, absl::StrCat("input \"", value.name, "\"")));
      PlanTensor tensor{value.name, value.dtype, input_shapes[i], static_cast<size_t>(*bytes),
                        nullptr};
      ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::Allocate(tensor.bytes));
      plan_->input_buffers_.push_back(std::move(buffer));
      tensor.data = plan_->input_buffers_.back().data();
      plan_->inputs_.push_back(std::move(tensor));
      slots_[graph_.inputs[i]] =
          Slot{Where::kInput, value.dtype, input_shapes[i], nullptr, static_cast<int>(i)};
    }
    return absl::OkStatus();
  }

  // Makes the given inputs' values known at plan time.
  absl::Status FixInputs(const std::vector<const TensorValue*>& fixed) {
    if (fixed.empty()) return absl::OkStatus();
    if (fixed.size() != graph_.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the model has ", graph_.inputs.size(),
                                                     " inputs, ", fixed.size(),
                                                     " fixed values given"));
    }
    for (size_t i = 0; i < fixed.size(); ++i) {
      if (fixed[i] == nullptr) continue;
      PlanTensor& input = plan_->inputs_[i];
      if (fixed[i]->dtype != input.dtype || fixed[i]->shape != input.shape ||
          fixed[i]->bytes.size() != input.bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input \"", input.name, "\": the fixed value is ", DataTypeName(fixed[i]->dtype), " ",
            ShapeToString(fixed[i]->shape), ", the input ", DataTypeName(input.dtype), " ",
            ShapeToString(input.shape)));
      }
      SetKnown(graph_.inputs[i], *fixed[i]);
      input.fixed_value = plan_->known_.back()->bytes.data();
    }
    return absl::OkStatus();
  }

  absl::Status PlanNode(const Node& node) {
    if (node.op == "Dropout" && !registry_.Has(node.op)) return PlanDropout(node);
    std::vector<TensorDesc> descs;
    bool all_known = !node.inputs.empty() && !IsNondeterministicOp(node.op);
    for (int in : node.inputs) {
      TensorDesc desc;
      if (in == Graph::kNoValue) {
        desc.present = false;
      } else {
        const Slot& slot = slots_[in];
        if (slot.where == Where::kNone) {
          return NodeError(node, absl::InternalError(absl::StrCat(
                                     "input \"", graph_.values[in].name, "\" is not computed")));
        }
        desc.dtype = slot.dtype;
        desc.shape = slot.shape;
        desc.data = slot.known;
        if (slot.where != Where::kKnown) all_known = false;
      }
      descs.push_back(std::move(desc));
    }
    std::unique_ptr<PreparedKernel> kernel;
    const ControlFlowKernel* control = nullptr;
    if (IsControlFlowOp(node.op) && (node.domain.empty() || node.domain == "ai.onnx")) {
      auto planned = PlanControlFlow(node, descs, registry_, options_);
      if (!planned.ok()) return NodeError(node, planned.status());
      absl::Status reserved =
          Reserve(static_cast<int64_t>((*planned)->owned_bytes()), "the plans of its subgraphs");
      if (!reserved.ok()) return NodeError(node, reserved);
      control = planned->get();
      kernel = *std::move(planned);
    } else {
      const std::optional<Node> plain = PlainWhereKnown(node, descs, all_known);
      PrepareContext context = MakePrepareContext(plain.has_value() ? *plain : node, graph_.opset,
                                                  descs, options_.intra_op_threads);
      context.run_once = all_known;
      auto prepared = registry_.Prepare(context);
      if (!prepared.ok()) return NodeError(node, prepared.status());
      kernel = std::move(prepared).value();
    }
    const std::vector<TensorDesc>& outs = kernel->outputs();
    // Computed now, output 0 may take over a first input no one reads afterwards: as it is, with
    // another shape (a view op: Reshape, ...), or updated in place (ScatterElements, ...).
    const bool same_bytes = all_known && IsViewOp(node);
    const bool reuse_first =
        (same_bytes || (all_known && UpdatesItsFirstInput(node))) && DeadFirstInput(node, outs);
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorDesc& out = outs[i];
      const bool bad_dim =
          std::any_of(out.shape.begin(), out.shape.end(), [](int64_t d) { return d < 0; });
      if (bad_dim || DataTypeSize(out.dtype) == 0) {
        return NodeError(node, absl::InternalError(absl::StrCat(
                                   "the kernel declares an output of ", DataTypeName(out.dtype),
                                   " ", ShapeToString(out.shape), ", which cannot be allocated")));
      }
      // Every output is allocated (in the arena, an output buffer or a plan-time value): refuse
      // one that overflows or alone exceeds the cap before anything is sized from it.
      std::optional<int64_t> bytes = CheckedBytes(out.dtype, out.shape);
      if (!bytes.has_value()) {
        return NodeError(node, absl::InvalidArgumentError(absl::StrCat(
                                   "output of ", DataTypeName(out.dtype), " ",
                                   ShapeToString(out.shape), " overflows a 64-bit byte count")));
      }
      if (options_.max_plan_bytes > 0 && *bytes > options_.max_plan_bytes - owned_ &&
          !(i == 0 && reuse_first)) {
        return NodeError(node,
                         OverCap(*bytes, absl::StrCat("an output of ", DataTypeName(out.dtype), " ",
                                                      ShapeToString(out.shape))));
      }
    }
    if (options_.max_plan_bytes > 0 &&
        kernel->workspace_bytes() > static_cast<size_t>(options_.max_plan_bytes)) {
      return NodeError(node,
                       OverCap(static_cast<int64_t>(kernel->workspace_bytes()), "its workspace"));
    }
    bool all_outputs_known = !IsNondeterministicOp(node.op);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == Graph::kNoValue) continue;
      if (i >= outs.size()) {
        return NodeError(node, absl::InternalError(absl::StrCat(
                                   "the kernel declares ", outs.size(), " outputs, output ", i,
                                   " (\"", graph_.values[node.outputs[i]].name, "\") is used")));
      }
      if (outs[i].data == nullptr) all_outputs_known = false;
    }

    if (all_known) {
      // Every input is known: compute the node now (e.g. Shape -> Gather -> Concat).
      std::vector<const void*> ptrs;
      for (const TensorDesc& d : descs) ptrs.push_back(d.data);
      int64_t taken_bytes = 0;
      std::optional<TensorValue> taken;
      if (reuse_first) taken = TakeKnown(node.inputs[0], &taken_bytes);
      if (taken.has_value() && same_bytes) {
        taken->shape = outs[0].shape;
        SetKnown(node.outputs[0], *std::move(taken), taken_bytes);
        computed_now_ = true;
        ++plan_->folded_nodes_;
        return absl::OkStatus();
      }
      for (size_t i = taken.has_value() ? 1 : 0; i < outs.size(); ++i) {
        absl::Status reserved =
            Reserve(static_cast<int64_t>(ByteSize(outs[i].dtype, outs[i].shape)),
                    "a value computed at plan time");
        if (!reserved.ok()) return NodeError(node, reserved);
      }
      auto values = EvaluateOnHost(*kernel, ptrs, taken.has_value() ? &*taken : nullptr);
      if (!values.ok()) return NodeError(node, values.status());
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] == Graph::kNoValue) continue;
        SetKnown(node.outputs[i], std::move((*values)[i]),
                 i == 0 && taken.has_value()
                     ? taken_bytes
                     : static_cast<int64_t>(ByteSize(outs[i].dtype, outs[i].shape)));
      }
      computed_now_ = true;
      ++plan_->folded_nodes_;
      return absl::OkStatus();
    }
    if (all_outputs_known) {
      // Prepare already knows the values (e.g. Shape of a tensor of known shape).
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] == Graph::kNoValue) continue;
        absl::Status reserved =
            Reserve(static_cast<int64_t>(ByteSize(outs[i].dtype, outs[i].shape)),
                    "a value computed at plan time");
        if (!reserved.ok()) return NodeError(node, reserved);
        SetKnown(node.outputs[i], CopyTensorValue(outs[i].dtype, outs[i].shape, outs[i].data),
                 static_cast<int64_t>(ByteSize(outs[i].dtype, outs[i].shape)));
      }
      computed_now_ = true;
      ++plan_->folded_nodes_;
      return absl::OkStatus();
    }

    if (IsViewOp(node) && ViewOf(node, outs)) return absl::OkStatus();

    const int step = static_cast<int>(plan_->steps_.size());
    StepIo io;
    for (int in : node.inputs) {
      io.inputs.push_back(in);
      if (in != Graph::kNoValue && slots_[in].where == Where::kArena) {
        lifetimes_[slots_[in].index].last = step;
      }
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const int out = i < node.outputs.size() ? node.outputs[i] : Graph::kNoValue;
      // A padded layout, or a string output with its strings' storage, may take more.
      const size_t bytes =
          std::max(ByteSize(outs[i].dtype, outs[i].shape), kernel->output_storage_bytes(i));
      if (out != Graph::kNoValue && IsGraphOutput(out)) {
        absl::Status reserved = Reserve(static_cast<int64_t>(bytes),
                                        absl::StrCat("output \"", graph_.values[out].name, "\""));
        if (!reserved.ok()) return NodeError(node, reserved);
        absl::StatusOr<AlignedBuffer> buffer = AlignedBuffer::Allocate(bytes);
        if (!buffer.ok()) return NodeError(node, buffer.status());
        plan_->output_buffers_.push_back(*std::move(buffer));
        output_producer_.push_back(step);
        slots_[out] = Slot{Where::kOutput, outs[i].dtype, outs[i].shape, nullptr,
                           static_cast<int>(plan_->output_buffers_.size() - 1)};
        io.outputs.push_back(slots_[out]);
        io.output_bytes.push_back(bytes);
        continue;
      }
      // Unused outputs still need room: the kernel writes them (padded, if it says so).
      lifetimes_.push_back(BufferLifetime{bytes, step, step});
      if (outs[i].dtype == DataType::kString) string_buffers_.push_back(lifetimes_.size() - 1);
      Slot slot{Where::kArena,
                outs[i].dtype,
                outs[i].shape,
                nullptr,
                static_cast<int>(lifetimes_.size() - 1),
                0,
                step};
      if (out != Graph::kNoValue) slots_[out] = slot;
      io.outputs.push_back(slot);
      io.output_bytes.push_back(bytes);
    }
    if (kernel->workspace_bytes() > 0) {
      lifetimes_.push_back(BufferLifetime{kernel->workspace_bytes(), step, step});
      io.workspace = static_cast<int>(lifetimes_.size() - 1);
    }
    step_cost_.push_back(EstimateStepCostNs(node.op, descs, outs));
    step_node_.push_back(&node);
    step_descs_.push_back(std::move(descs));
    PlanStep plan_step;
    plan_step.kernel = kernel.get();
    plan_step.node_name = node.name;
    plan_step.op = node.op;
    plan_step.control = control;
    plan_->steps_.push_back(std::move(plan_step));
    plan_->kernels_.push_back(std::move(kernel));
    step_io_.push_back(std::move(io));
    PlaceInputsInOutput(step);
    return absl::OkStatus();
  }

  // A step whose kernel only lays its inputs one after another in output 0
  // (PreparedKernel::input_offsets_in_output: a concatenation at batch 1) gets each input's
  // arena buffer moved inside its output's, at that input's offset, where the buffer holds that
  // input alone, nothing reads it after this step and the offset keeps the alignment: the
  // producers then write the pieces in place and the step copies nothing for them. The
  // output's buffer lives from the first producer on. (Inception and fire blocks at batch 1.)
  void PlaceInputsInOutput(int step) {
    const std::vector<size_t> offsets = plan_->kernels_.back()->input_offsets_in_output();
    StepIo& io = step_io_[step];
    if (offsets.size() != io.inputs.size() || io.outputs.empty()) return;
    const Slot& out = io.outputs[0];
    if (out.where != Where::kArena || out.offset != 0 || out.dtype == DataType::kString) return;
    const int into = out.index;
    for (size_t k = 0; k < offsets.size(); ++k) {
      const int value = io.inputs[k];
      if (value == Graph::kNoValue || offsets[k] == PreparedKernel::kNotInOutput ||
          offsets[k] % kBufferAlignment != 0) {
        continue;
      }
      const Slot& in = slots_[value];
      const int from = in.index;
      const size_t bytes = ByteSize(in.dtype, in.shape);
      if (in.where != Where::kArena || in.offset != 0 || from == into || in.dtype != out.dtype ||
          lifetimes_[from].bytes != bytes || offsets[k] > lifetimes_[into].bytes ||
          bytes > lifetimes_[into].bytes - offsets[k] ||
          std::count_if(io.inputs.begin(), io.inputs.end(), [&](int v) {
            return v != Graph::kNoValue && slots_[v].where == Where::kArena &&
                   slots_[v].index == from;
          }) != 1) {
        continue;
      }
      // Nothing reads the piece (or a view of it) after this step: a piece read later would
      // keep the whole output's buffer alive that long (DenseNet's features, each read by every
      // later concatenation of its block, would keep every concatenation's buffer).
      bool read_later = false;
      for (size_t v = 0; v < slots_.size() && !read_later; ++v) {
        read_later =
            slots_[v].where == Where::kArena && slots_[v].index == from &&
            uses_left_[v] > std::count(io.inputs.begin(), io.inputs.end(), static_cast<int>(v));
      }
      if (read_later) continue;
      // Every value in `from` (the input and its views), and the producer's output, moves.
      MoveBuffer(from, into, offsets[k], step, 1);
    }
  }

  // Moves every value in arena buffer `from` (and a step's output there) `offset` bytes into
  // buffer `into`, which then lives as long as both; `step` reads `inputs` more in place.
  void MoveBuffer(int from, int into, size_t offset, int step, int inputs) {
    auto move = [&](Slot& slot) {
      if (slot.where != Where::kArena || slot.index != from) return;
      slot.index = into;
      slot.offset += offset;
    };
    for (Slot& slot : slots_) move(slot);
    for (StepIo& other : step_io_) {
      for (Slot& slot : other.outputs) move(slot);
    }
    BufferLifetime& whole = lifetimes_[into];
    BufferLifetime& gone = lifetimes_[from];
    whole.first = std::min(whole.first, gone.first);
    whole.last = std::max(whole.last, gone.last);
    gone.bytes = 0;
    gone.last = gone.first;
    placed_.resize(plan_->steps_.size(), false);
    placed_[step] = true;
    plan_->placed_inputs_ += inputs;
  }

  // A concatenation whose inputs all lie one after another in one buffer at its own offsets
  // from one base (placed there for a later concatenation: each of a DenseNet block's
  // concatenations is a prefix of the next) becomes a view of those bytes: its output moves
  // there and its step copies nothing.
  void ViewConcatenationsOfPlacedPieces() {
    for (size_t s = 0; s < plan_->steps_.size(); ++s) {
      const PreparedKernel* kernel = plan_->steps_[s].kernel;
      if (plan_->steps_[s].control != nullptr || kernel == nullptr) continue;
      const std::vector<size_t> offsets = kernel->input_offsets_in_output();
      const StepIo& io = step_io_[s];
      if (offsets.empty() || offsets.size() != io.inputs.size() || io.outputs.empty()) continue;
      const Slot& out = io.outputs[0];
      const int own = out.index;
      const size_t bytes = io.output_bytes[0];
      if (out.where != Where::kArena || out.offset != 0 || out.dtype == DataType::kString ||
          lifetimes_[own].first != static_cast<int>(s) || lifetimes_[own].bytes != bytes) {
        continue;
      }
      int into = -1;
      size_t base = 0;
      bool view = true;
      for (size_t k = 0; k < offsets.size() && view; ++k) {
        const int v = io.inputs[k];
        const Slot* in = v == Graph::kNoValue ? nullptr : &slots_[v];
        if (in == nullptr || offsets[k] == PreparedKernel::kNotInOutput ||
            in->where != Where::kArena || in->index == own || in->dtype != out.dtype ||
            (k == 0 && in->offset < offsets[0])) {
          view = false;
          break;
        }
        if (k == 0) {
          into = in->index;
          base = in->offset - offsets[0];
        }
        view = in->index == into && in->offset == base + offsets[k];
      }
      if (!view || base % kBufferAlignment != 0 || base > lifetimes_[into].bytes ||
          bytes > lifetimes_[into].bytes - base) {
        continue;
      }
      MoveBuffer(own, into, base, static_cast<int>(s), static_cast<int>(offsets.size()));
    }
  }

  // Splits the steps into parallel regions (branch_plan.h) when the options allow it, prepares
  // the regions' steps again with their lanes' share of the threads, and returns each arena
  // buffer's lane: a buffer used by one lane of one region only may share bytes with buffers of
  // that lane (by lifetime) and never with another lane's; any other buffer has its lifetime
  // stretched over every region whose steps touch it. Empty when nothing forks.
  std::vector<BufferLane> PlanRegions() {
    const int threads = std::max(1, options_.intra_op_threads);
    const int max_lanes = std::min(options_.max_branch_streams, kMaxBranchStreams);
    const size_t n = plan_->steps_.size();
    if (max_lanes <= 1 || !string_buffers_.empty()) return {};
    for (const PlanStep& step : plan_->steps_) {
      if (step.control != nullptr) return {};  // bodies are captured on streams of their own
    }
    std::vector<BranchStep> branch_steps(n);
    for (size_t s = 0; s < n; ++s) {
      branch_steps[s].cost_ns = step_cost_[s];
      for (int in : step_io_[s].inputs) {
        if (in == Graph::kNoValue) continue;
        const Slot& slot = slots_[in];
        if (slot.where == Where::kArena) {
          branch_steps[s].deps.push_back(slot.producer >= 0 ? slot.producer
                                                            : lifetimes_[slot.index].first);
        } else if (slot.where == Where::kOutput) {
          branch_steps[s].deps.push_back(output_producer_[slot.index]);
        }
      }
    }
    BranchOptions branch_options;
    branch_options.max_lanes = max_lanes;
    branch_options.min_lane_cost_ns = options_.min_branch_cost_ns;
    branch_options.threads = threads;
    std::vector<ParallelRegion> regions = PlanBranches(branch_steps, branch_options);
    if (regions.empty()) return {};
    std::vector<BufferLane> step_lane(n);
    lane_threads_.assign(n, threads);
    for (size_t r = 0; r < regions.size(); ++r) {
      const int lane_threads = std::max(1, threads / static_cast<int>(regions[r].lanes.size()));
      for (size_t lane = 0; lane < regions[r].lanes.size(); ++lane) {
        for (int s : regions[r].lanes[lane]) {
          step_lane[s] = BufferLane{static_cast<int>(r), static_cast<int>(lane)};
          lane_threads_[s] = lane_threads;
          if (lane_threads < threads) PrepareAgain(static_cast<size_t>(s), lane_threads);
        }
      }
    }
    // The steps that touch each arena buffer: its producer, its readers, a workspace's step.
    std::vector<std::vector<int>> touched_by(lifetimes_.size());
    for (size_t s = 0; s < n; ++s) {
      const StepIo& io = step_io_[s];
      for (int in : io.inputs) {
        if (in != Graph::kNoValue && slots_[in].where == Where::kArena) {
          touched_by[slots_[in].index].push_back(static_cast<int>(s));
        }
      }
      for (const Slot& out : io.outputs) {
        if (out.where == Where::kArena) touched_by[out.index].push_back(static_cast<int>(s));
      }
      if (io.workspace >= 0) touched_by[io.workspace].push_back(static_cast<int>(s));
    }
    std::vector<BufferLane> lanes(lifetimes_.size());
    for (size_t b = 0; b < lifetimes_.size(); ++b) {
      const std::vector<int>& steps = touched_by[b];
      const bool confined = !steps.empty() && step_lane[steps[0]].region >= 0 &&
                            std::all_of(steps.begin(), steps.end(), [&](int s) {
                              return step_lane[s].region == step_lane[steps[0]].region &&
                                     step_lane[s].lane == step_lane[steps[0]].lane;
                            });
      if (confined) {
        lanes[b] = step_lane[steps[0]];
        continue;
      }
      for (int s : steps) {
        if (step_lane[s].region < 0) continue;
        const ParallelRegion& region = regions[step_lane[s].region];
        lifetimes_[b].first = std::min(lifetimes_[b].first, region.first);
        lifetimes_[b].last = std::max(lifetimes_[b].last, region.end - 1);
      }
    }
    plan_->regions_ = std::move(regions);
    return lanes;
  }

  // Prepares step `s` again with `threads` intra-op threads; keeps the first kernel when the
  // new one fails or stores its outputs differently.
  void PrepareAgain(size_t s, int threads) {
    const Node& node = *step_node_[s];
    auto prepared =
        registry_.Prepare(MakePrepareContext(node, graph_.opset, step_descs_[s], threads));
    if (!prepared.ok()) return;
    const PreparedKernel& old_kernel = *plan_->kernels_[s];
    const PreparedKernel& new_kernel = **prepared;
    if (new_kernel.outputs().size() != old_kernel.outputs().size()) return;
    for (size_t i = 0; i < old_kernel.outputs().size(); ++i) {
      const TensorDesc& a = old_kernel.outputs()[i];
      const TensorDesc& b = new_kernel.outputs()[i];
      if (a.dtype != b.dtype || a.shape != b.shape || (a.data == nullptr) != (b.data == nullptr) ||
          old_kernel.output_storage_bytes(i) != new_kernel.output_storage_bytes(i)) {
        return;
      }
    }
    StepIo& io = step_io_[s];
    const size_t workspace = new_kernel.workspace_bytes();
    if (io.workspace >= 0) {
      lifetimes_[io.workspace].bytes = workspace;
    } else if (workspace > 0) {
      const int at = static_cast<int>(s);
      lifetimes_.push_back(BufferLifetime{workspace, at, at});
      io.workspace = static_cast<int>(lifetimes_.size() - 1);
    }
    plan_->steps_[s].kernel = prepared->get();
    plan_->kernels_[s] = *std::move(prepared);
  }

  // Reshape, Flatten, Squeeze and Unsqueeze only relabel the shape: the output can be a view
  // of the input's buffer (an alias in the memory plan; no step). Not for graph outputs, which
  // have their own buffers. Returns false when the node must run.
  // A Cast is one when its input already has the type it casts to (ViewOf and DeadFirstInput
  // check that the output keeps the input's type): torchvision's detectors cast each RoiAlign
  // output, float, to float.
  static bool IsViewOp(const Node& node) {
    return (node.domain.empty() || node.domain == "ai.onnx") && !node.inputs.empty() &&
           node.outputs.size() == 1 &&
           (node.op == "Reshape" || node.op == "Flatten" || node.op == "Squeeze" ||
            node.op == "Unsqueeze" || node.op == "Cast");
  }

  bool ViewOf(const Node& node, const std::vector<TensorDesc>& outs) {
    const int out = node.outputs[0];
    if (out == Graph::kNoValue || IsGraphOutput(out) || outs.size() != 1) return false;
    const Slot& in = slots_[node.inputs[0]];
    if ((in.where != Where::kArena && in.where != Where::kInput) || in.dtype != outs[0].dtype ||
        NumElements(in.shape) != NumElements(outs[0].shape)) {
      return false;
    }
    Slot view = in;
    view.dtype = outs[0].dtype;
    view.shape = outs[0].shape;
    slots_[out] = std::move(view);
    ++plan_->view_nodes_;
    return true;
  }

  // An inference Dropout whose mask is used: the output aliases the input, the mask is a
  // plan-time constant of all true.
  absl::Status PlanDropout(const Node& node) {
    const Slot& in = slots_[node.inputs[0]];
    const int out = node.outputs[0];
    if (out != Graph::kNoValue) {
      if (IsGraphOutput(out) && in.where == Where::kArena) {
        return NodeError(node, absl::UnimplementedError(
                                   "an intermediate passed through Dropout to a graph output "
                                   "while the mask is used is not supported"));
      }
      slots_[out] = in;
    }
    if (node.outputs.size() > 1 && node.outputs[1] != Graph::kNoValue) {
      TensorValue mask{DataType::kBool, in.shape, {}};
      mask.bytes.assign(static_cast<size_t>(NumElements(in.shape)), uint8_t{1});
      SetKnown(node.outputs[1], std::move(mask));
    }
    ++plan_->folded_nodes_;
    return absl::OkStatus();
  }

  // Counts `bytes` more owned by the plan (`what` names them); RESOURCE_EXHAUSTED when that
  // passes the cap.
  absl::Status Reserve(int64_t bytes, absl::string_view what) {
    if (options_.max_plan_bytes > 0 && bytes > options_.max_plan_bytes - owned_) {
      return OverCap(bytes, what);
    }
    owned_ += bytes;
    return absl::OkStatus();
  }

  absl::Status OverCap(int64_t bytes, absl::string_view what) const {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " needs ", bytes, " bytes; with the ", owned_,
                     " bytes planned before it the plan would pass limits.max_plan_bytes (",
                     options_.max_plan_bytes, ")"));
  }

  // `reserved`: the bytes Reserve counted for the value, given back when it is released.
  void SetKnown(int value, TensorValue tensor, int64_t reserved = 0) {
    plan_->known_.push_back(std::make_unique<TensorValue>(std::move(tensor)));
    const TensorValue& t = *plan_->known_.back();
    slots_[value] = Slot{Where::kKnown, t.dtype, t.shape, KnownData(t), -1};
    known_of_[value] = KnownEntry{plan_->known_.size() - 1, reserved};
  }

  // Whether `node`'s kernel may write output 0 over input 0 (it copies input 0 into output 0
  // unless the two are one, then updates it).
  static bool UpdatesItsFirstInput(const Node& node) {
    return (node.domain.empty() || node.domain == "ai.onnx") &&
           (node.op == "ScatterElements" || node.op == "Scatter" || node.op == "ScatterND");
  }

  // Whether input 0 of `node` is a value computed at plan time that nothing reads after `node`
  // (no other node, step, view, alias or graph output), read once by `node`, and of output 0's
  // type and byte size, so that output 0 may take over its bytes (TakeKnown).
  bool DeadFirstInput(const Node& node, const std::vector<TensorDesc>& outs) const {
    if (node.inputs.empty() || node.outputs.empty() || outs.empty() ||
        node.outputs[0] == Graph::kNoValue) {
      return false;
    }
    const int in = node.inputs[0];
    if (in == Graph::kNoValue || kept_[in] || uses_left_[in] != 1 ||
        std::count(node.inputs.begin(), node.inputs.end(), in) != 1) {
      return false;
    }
    auto it = known_of_.find(in);
    if (it == known_of_.end() || plan_->known_[it->second.index] == nullptr) return false;
    const TensorValue& value = *plan_->known_[it->second.index];
    return value.dtype != DataType::kString && value.dtype == outs[0].dtype &&
           !value.bytes.empty() && value.bytes.size() == ByteSize(outs[0].dtype, outs[0].shape);
  }

  // The plan-time value `value` (one in known_of_) taken out of the plan, its bytes keeping their
  // address; `*reserved` gets the bytes Reserve counted for it, which the caller gives back or
  // passes on.
  TensorValue TakeKnown(int value, int64_t* reserved) {
    auto it = known_of_.find(value);
    TensorValue taken = std::move(*plan_->known_[it->second.index]);
    plan_->known_[it->second.index].reset();
    *reserved = it->second.reserved;
    slots_[value].known = nullptr;
    known_of_.erase(it);
    return taken;
  }

  // How many node inputs read each value (a subgraph's outer values are inputs of its node too).
  void CountUses() {
    uses_left_.assign(graph_.values.size(), 0);
    kept_.assign(graph_.values.size(), false);
    for (const Node& node : graph_.nodes) {
      for (int in : node.inputs) {
        if (in != Graph::kNoValue) ++uses_left_[in];
      }
    }
    for (int in : graph_.inputs) kept_[in] = true;
    for (const GraphOutput& out : graph_.outputs) kept_[out.value] = true;
  }

  // After `node` is planned: a value computed at plan time that no node will read any more, and
  // that no step, view or alias reads (those are kept), is freed and its bytes given back to the
  // cap. A model planned per input value (a detector) computes its whole graph while planning;
  // without this its plan would keep every intermediate (gigabytes at 800x800).
  void ReleaseDeadValues(const Node& node) {
    for (int in : node.inputs) {
      if (in == Graph::kNoValue) continue;
      if (!computed_now_) kept_[in] = true;
      --uses_left_[in];
    }
    // The inputs no node reads any more, and the outputs no node reads at all.
    for (const std::vector<int>* values : {&node.inputs, &node.outputs}) {
      for (int value : *values) {
        if (value == Graph::kNoValue || uses_left_[value] > 0 || kept_[value] ||
            !known_of_.contains(value)) {
          continue;
        }
        int64_t reserved = 0;
        TakeKnown(value, &reserved);  // and dropped
        owned_ -= reserved;
      }
    }
  }

  bool IsGraphOutput(int value) const {
    for (const GraphOutput& out : graph_.outputs) {
      if (out.value == value) return true;
    }
    return false;
  }

  absl::Status SetOutputs() {
    for (const GraphOutput& out : graph_.outputs) {
      const Slot& slot = slots_[out.value];
      if (slot.where == Where::kNone || slot.where == Where::kArena) {
        return absl::InternalError(absl::StrCat("graph output \"", out.name, "\" is not computed"));
      }
      plan_->outputs_.push_back(PlanTensor{out.name, slot.dtype, slot.shape,
                                           ByteSize(slot.dtype, slot.shape), nullptr, nullptr,
                                           slot.where == Where::kKnown});
    }
    return absl::OkStatus();
  }

  uint8_t* Address(const Slot& slot, const MemoryPlan& memory) const {
    switch (slot.where) {
      case Where::kKnown:
        return static_cast<uint8_t*>(const_cast<void*>(slot.known));
      case Where::kInput:
        return plan_->input_buffers_[slot.index].data();
      case Where::kArena:
        return plan_->arena_->data() + memory.offsets[slot.index] + slot.offset;
      case Where::kOutput:
        return plan_->output_buffers_[slot.index].data();
      case Where::kNone:
        break;
    }
    return nullptr;
  }

  void Bind(const MemoryPlan& memory) {
    for (size_t s = 0; s < plan_->steps_.size(); ++s) {
      PlanStep& step = plan_->steps_[s];
      const StepIo& io = step_io_[s];
      for (int in : io.inputs) {
        step.inputs.push_back(in == Graph::kNoValue ? nullptr : Address(slots_[in], memory));
      }
      for (const Slot& out : io.outputs) step.outputs.push_back(Address(out, memory));
      if (io.workspace >= 0) step.workspace = plan_->arena_->data() + memory.offsets[io.workspace];
    }
    for (size_t i = 0; i < graph_.outputs.size(); ++i) {
      plan_->outputs_[i].data = Address(slots_[graph_.outputs[i].value], memory);
    }
  }

  // A step whose kernel may write output 0 over an input (PreparedKernel::in_place_input, e.g.
  // a convolution adding a residual) gets that input's arena buffer for output 0 where nothing
  // reads the input afterwards, no other input of the step is in that buffer, and both buffers
  // belong to the same lane of a parallel region (or neither does): the kernel then skips
  // copying the input (ResNet-50 at batch 8 copies 176 MB of residuals per run otherwise).
  void WriteOutputsOverInputs(const std::vector<BufferLane>& lanes) {
    in_place_.assign(plan_->steps_.size(), false);
    for (size_t s = 0; s < plan_->steps_.size(); ++s) {
      const PlanStep& step = plan_->steps_[s];
      if (step.control != nullptr || step.kernel == nullptr) continue;
      const int k = step.kernel->in_place_input();
      StepIo& io = step_io_[s];
      if (k < 0 || static_cast<size_t>(k) >= io.inputs.size() || io.outputs.empty() ||
          io.inputs[k] == Graph::kNoValue) {
        continue;
      }
      const Slot& in = slots_[io.inputs[k]];
      const Slot& out = io.outputs[0];
      if (in.where != Where::kArena || out.where != Where::kArena || in.index == out.index ||
          in.dtype != out.dtype || in.offset != 0 || out.offset != 0) {
        continue;
      }
      const int from = in.index, into = out.index;
      BufferLifetime& kept = lifetimes_[from];
      BufferLifetime& dropped = lifetimes_[into];
      const int at = static_cast<int>(s);
      if (kept.last != at || dropped.first != at || kept.bytes < dropped.bytes) continue;
      bool shared = false;
      for (size_t i = 0; i < io.inputs.size(); ++i) {
        const int v = io.inputs[i];
        shared = shared || (i != static_cast<size_t>(k) && v != Graph::kNoValue &&
                            slots_[v].where == Where::kArena && slots_[v].index == from);
      }
      if (shared || (io.workspace >= 0 && io.workspace == from)) continue;
      if (!lanes.empty() &&
          (lanes[from].region != lanes[into].region || lanes[from].lane != lanes[into].lane)) {
        continue;
      }
      if (std::find(string_buffers_.begin(), string_buffers_.end(), static_cast<size_t>(into)) !=
          string_buffers_.end()) {
        continue;
      }
      // Every value in `into` (the output and its views) moves to `from`.
      for (Slot& slot : slots_) {
        if (slot.where == Where::kArena && slot.index == into) slot.index = from;
      }
      io.outputs[0].index = from;
      kept.last = dropped.last;
      dropped.bytes = 0;
      dropped.last = dropped.first;
      in_place_[s] = true;
      ++plan_->in_place_steps_;
    }
  }

  // Steps of a multi-threaded plan clear their outputs and workspace of kClearOutputMinBytes or
  // more with non-temporal stores first, where that is faster (kernels/cpu/output_clearing.h).
  // Not a control-flow step: a capture records that by its kernel.
  void ClearLargeBuffers() {
    const int threads = std::max(1, options_.intra_op_threads);
    const kernels::cpu::OutputClearing mode = kernels::cpu::OutputClearingFor(registry_, threads);
    if (mode == kernels::cpu::OutputClearing::kOff) return;
    auto large = [](size_t bytes) {
      return bytes >= kernels::cpu::kClearOutputMinBytes ? bytes : 0;
    };
    for (size_t s = 0; s < plan_->steps_.size(); ++s) {
      PlanStep& step = plan_->steps_[s];
      if (step.control != nullptr) continue;
      std::vector<size_t> outputs;
      bool any = false;
      const StepIo& io = step_io_[s];
      for (size_t i = 0; i < io.outputs.size(); ++i) {
        // The output's own bytes (a piece of a concatenation is part of a larger buffer).
        size_t bytes = io.output_bytes[i];
        // An output written over an input holds that input when the kernel starts, and one
        // whose inputs were written into it holds them.
        if (i == 0 &&
            ((s < in_place_.size() && in_place_[s]) || (s < placed_.size() && placed_[s]))) {
          bytes = 0;
        }
        outputs.push_back(large(bytes));
        any = any || outputs.back() > 0;
      }
      const size_t workspace = large(step.kernel->workspace_bytes());
      if (!any && workspace == 0) continue;
      // A step of a parallel region clears on its lane's threads.
      const int step_threads = s < lane_threads_.size() ? lane_threads_[s] : threads;
      plan_->kernels_.push_back(kernels::cpu::ClearingOutputsFirst(
          *step.kernel, std::move(outputs), workspace, step_threads, mode, /*trial_phase=*/s));
      step.kernel = plan_->kernels_.back().get();
    }
  }

  struct StepIo {
    std::vector<int> inputs;  // value ids
    std::vector<Slot> outputs;
    std::vector<size_t> output_bytes;  // per output: the bytes the kernel writes
    int workspace = -1;                // arena buffer
  };

  const Graph& graph_;
  const KernelRegistry& registry_;
  const PlanOptions& options_;
  std::unique_ptr<ExecutionPlan> plan_;
  std::vector<Slot> slots_;
  std::vector<BufferLifetime> lifetimes_;
  std::vector<size_t> string_buffers_;  // lifetimes_ of string values
  std::vector<StepIo> step_io_;
  // Per step, for the branch planner: estimated cost, node and input descriptors.
  std::vector<int64_t> step_cost_;
  std::vector<const Node*> step_node_;
  std::vector<std::vector<TensorDesc>> step_descs_;
  std::vector<int> output_producer_;  // the step that writes each output buffer
  std::vector<int> lane_threads_;     // per step, when the plan forks: its lane's threads
  std::vector<bool> in_place_;        // per step: output 0 is written over an input
  std::vector<bool> placed_;          // per step: some input's producer writes it into output 0
  int64_t owned_ = 0;                 // bytes the plan owns so far (for the cap)
  // Values computed at plan time: their index in known_ and the bytes reserved for them.
  struct KnownEntry {
    size_t index = 0;
    int64_t reserved = 0;
  };
  absl::flat_hash_map<int, KnownEntry> known_of_;
  std::vector<int> uses_left_;  // per value: node inputs not yet planned that read it
  std::vector<bool> kept_;      // per value: read by a step, view or alias, or a graph input/output
  bool computed_now_ = false;   // the node being planned was computed at plan time
};

absl::StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Create(
    const Graph& graph, const KernelRegistry& registry, const std::vector<Shape>& input_shapes,
    const PlanOptions& options, const std::vector<const TensorValue*>& fixed_inputs) {
  // A last resort: the limits above are checked before each allocation, but a container
  // growing inside a kernel's Prepare can still fail; that is an error status, never an abort.
  try {
    if (options.unrolled_iterations == nullptr) {
      PlanOptions counted = options;
      counted.unrolled_iterations = std::make_shared<int64_t>(0);
      PlanBuilder builder(graph, registry, counted);
      return builder.Build(input_shapes, fixed_inputs);
    }
    PlanBuilder builder(graph, registry, options);
    return builder.Build(input_shapes, fixed_inputs);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("planning ran out of memory");
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("planning ran out of memory: ", e.what()));
  }
}

}  // namespace reprise::runtime::engine
