#include "runtime/engine/control_flow.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/capture.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"

namespace reprise::runtime::engine {
namespace {

// Copies `bytes` from `src` to `dst`; the two may be the same buffer (a pass-through).
void CopyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

bool ScalarTrue(const void* data, DataType dtype) {
  switch (DataTypeSize(dtype)) {
    case 1:
      return *static_cast<const uint8_t*>(data) != 0;
    case 2:
      return *static_cast<const uint16_t*>(data) != 0;
    case 4:
      return *static_cast<const uint32_t*>(data) != 0;
    case 8:
      return *static_cast<const uint64_t*>(data) != 0;
    default:
      return false;
  }
}

std::string DescText(DataType dtype, const Shape& shape) {
  return absl::StrCat(DataTypeName(dtype), " ", ShapeToString(shape));
}

// A one-element boolean (or numeric) tensor: a condition.
absl::Status CheckCondition(const TensorDesc& desc, absl::string_view what) {
  if (NumElements(desc.shape) != 1 || DataTypeSize(desc.dtype) == 0 ||
      desc.dtype == DataType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be one boolean, got ", DescText(desc.dtype, desc.shape)));
  }
  return absl::OkStatus();
}

// A task of a control-flow node that is not an ONNX op: staging, moving values, setting the
// condition value. `fn(args)` does the work; `outputs` only says how many output pointers the
// task is bound with.
class HelperKernel : public PreparedKernel {
 public:
  using Fn = std::function<absl::Status(const KernelArgs&)>;
  HelperKernel(std::string op, size_t num_outputs, Fn fn)
      : op_(std::move(op)), outputs_(num_outputs), fn_(std::move(fn)) {
    for (TensorDesc& out : outputs_) out.dtype = DataType::kUInt8;
  }
  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs& args) const override { return fn_(args); }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  Fn fn_;
};

// Plans a subgraph: its formal inputs `formal` (types and shapes; no values), then the outer
// values it reads, from the node's `inputs`.
absl::StatusOr<std::unique_ptr<ExecutionPlan>> PlanSubgraph(const Subgraph& subgraph,
                                                            const std::vector<TensorDesc>& formal,
                                                            const std::vector<TensorDesc>& inputs,
                                                            const KernelRegistry& registry,
                                                            const PlanOptions& options) {
  const Graph& graph = *subgraph.graph;
  if (graph.inputs.size() != formal.size() + subgraph.outer_inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(subgraph.attribute, " has ", graph.inputs.size(),
                                                   " inputs, expected ",
                                                   formal.size() + subgraph.outer_inputs.size()));
  }
  PlanOptions sub = options;
  sub.input_dtypes.clear();
  sub.input_shapes_are_hints = true;
  std::vector<Shape> shapes;
  std::vector<TensorValue> known;
  known.reserve(graph.inputs.size());
  std::vector<const TensorValue*> fixed;
  bool any_fixed = false;
  auto add = [&](const TensorDesc& desc, const Value& declared) -> absl::Status {
    if (declared.dtype != DataType::kUndefined && declared.dtype != desc.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          subgraph.attribute, " input \"", declared.name, "\" is declared ",
          DataTypeName(declared.dtype), ", the node gives ", DataTypeName(desc.dtype)));
    }
    sub.input_dtypes.push_back(desc.dtype);
    shapes.push_back(desc.shape);
    if (desc.data != nullptr) {
      known.push_back(CopyTensorValue(desc.dtype, desc.shape, desc.data));
      fixed.push_back(&known.back());
      any_fixed = true;
    } else {
      fixed.push_back(nullptr);
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < formal.size(); ++i) {
    RETURN_IF_ERROR(add(formal[i], graph.values[graph.inputs[i]]));
  }
  for (size_t k = 0; k < subgraph.outer_inputs.size(); ++k) {
    const size_t at = subgraph.outer_inputs[k];
    if (at >= inputs.size() || !inputs[at].present) {
      return absl::InternalError(
          absl::StrCat(subgraph.attribute, ": outer value ", k, " is not an input of the node"));
    }
    RETURN_IF_ERROR(add(inputs[at], graph.values[graph.inputs[formal.size() + k]]));
  }
  auto plan = ExecutionPlan::Create(graph, registry, shapes, sub,
                                    any_fixed ? fixed : std::vector<const TensorValue*>{});
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(subgraph.attribute, ": ", plan.status().message()));
  }
  return plan;
}

size_t PlanBytes(const ExecutionPlan& plan) { return plan.arena_bytes() + plan.owned_bytes(); }

absl::Status InBody(absl::string_view what, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// Captures `fn(body_stream, inner scope)` into `body`, a child instance of the capture.
template <typename Fn>
absl::Status CaptureBody(ModelRI* body, const CaptureScope& scope, Fn&& fn) {
  ASSIGN_OR_RETURN(Stream * stream, scope.bodies->At(scope.depth));
  RETURN_IF_ERROR(stream->BeginBodyCapture(body, scope.mode));
  CaptureScope inner = scope;
  inner.depth = scope.depth + 1;
  absl::Status status = fn(stream, inner);
  absl::Status ended = stream->EndBodyCapture();
  RETURN_IF_ERROR(status);
  return ended;
}

absl::Status Launch(Stream* stream, const PreparedKernel& kernel,
                    const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  return stream->LaunchKernel(kernel, std::span<const void* const>(inputs.data(), inputs.size()),
                              std::span<void* const>(outputs.data(), outputs.size()), nullptr);
}

// ---------------------------------------------------------------------------------------------
// If

class IfKernel : public ControlFlowKernel {
 public:
  // `branches[b]` is null when the condition known at planning excludes branch b.
  IfKernel(const Node& node, std::unique_ptr<ExecutionPlan> then_plan,
           std::unique_ptr<ExecutionPlan> else_plan, DataType cond_dtype,
           std::vector<TensorDesc> outputs)
      : outputs_(std::move(outputs)), cond_dtype_(cond_dtype) {
    plans_[0] = std::move(then_plan);
    plans_[1] = std::move(else_plan);
    const char* names[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; ++b) {
      if (plans_[b] == nullptr) continue;
      outer_[b] = node.FindSubgraph(names[b])->outer_inputs;
      const ExecutionPlan* plan = plans_[b].get();
      const std::vector<size_t>* outer = &outer_[b];
      enter_[b] =
          std::make_unique<HelperKernel>(absl::StrCat("If.", b == 0 ? "then" : "else", ".enter"), 0,
                                         [plan, outer](const KernelArgs& args) {
                                           for (size_t k = 0; k < outer->size(); ++k) {
                                             const PlanTensor& in = plan->inputs()[k];
                                             CopyBytes(in.data, args.inputs[(*outer)[k]], in.bytes);
                                           }
                                           return absl::OkStatus();
                                         });
      exit_[b] =
          std::make_unique<HelperKernel>(absl::StrCat("If.", b == 0 ? "then" : "else", ".exit"),
                                         outputs_.size(), [plan](const KernelArgs& args) {
                                           for (size_t j = 0; j < plan->outputs().size(); ++j) {
                                             const PlanTensor& out = plan->outputs()[j];
                                             CopyBytes(args.outputs[j], out.data, out.bytes);
                                           }
                                           return absl::OkStatus();
                                         });
    }
    if (plans_[0] != nullptr && plans_[1] != nullptr) {
      set_condition_ = std::make_unique<HelperKernel>(
          "If.condition", 1, [dtype = cond_dtype_](const KernelArgs& args) {
            *static_cast<uint32_t*>(args.outputs[0]) = ScalarTrue(args.inputs[0], dtype) ? 1 : 0;
            return absl::OkStatus();
          });
    }
  }

  absl::string_view op() const override { return "If"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t owned_bytes() const override {
    size_t bytes = 0;
    for (const auto& plan : plans_) bytes += plan != nullptr ? PlanBytes(*plan) : 0;
    return bytes;
  }

  absl::Status Run(const KernelArgs& args) const override {
    const int b = Branch(args.inputs[0]);
    RETURN_IF_ERROR(enter_[b]->Run(args));
    RETURN_IF_ERROR(InBody(Name(b), plans_[b]->RunSteps()));
    return exit_[b]->Run(args);
  }

  absl::Status Record(const PlanStep& step, Stream* stream,
                      const CaptureScope& scope) const override {
    if (set_condition_ == nullptr) {  // one branch: inline
      const int b = plans_[0] != nullptr ? 0 : 1;
      return RecordBranch(b, step, stream, scope);
    }
    ASSIGN_OR_RETURN(ConditionHandle condition,
                     scope.root->CreateCondition(0, /*assign_default=*/true));
    RETURN_IF_ERROR(Launch(stream, *set_condition_, {step.inputs[0]}, {condition.value}));
    ASSIGN_OR_RETURN(std::vector<ModelRI*> bodies,
                     stream->AddConditional(ConditionalKind::kIf, condition, 2));
    for (int b = 0; b < 2; ++b) {
      absl::Status captured =
          CaptureBody(bodies[b], scope, [&](Stream* body, const CaptureScope& inner) {
            return RecordBranch(b, step, body, inner);
          });
      if (!captured.ok()) return captured;
    }
    return absl::OkStatus();
  }

 private:
  int Branch(const void* condition) const {
    if (plans_[0] == nullptr) return 1;
    if (plans_[1] == nullptr) return 0;
    return ScalarTrue(condition, cond_dtype_) ? 0 : 1;
  }
  static const char* Name(int b) { return b == 0 ? "then_branch" : "else_branch"; }

  absl::Status RecordBranch(int b, const PlanStep& step, Stream* stream,
                            const CaptureScope& scope) const {
    RETURN_IF_ERROR(Launch(stream, *enter_[b], step.inputs, {}));
    RETURN_IF_ERROR(InBody(Name(b), EnqueuePlan(*plans_[b], stream, &scope)));
    return Launch(stream, *exit_[b], {}, step.outputs);
  }

  std::vector<TensorDesc> outputs_;
  DataType cond_dtype_;
  std::unique_ptr<ExecutionPlan> plans_[2];
  std::vector<size_t> outer_[2];
  std::unique_ptr<HelperKernel> enter_[2], exit_[2];
  std::unique_ptr<HelperKernel> set_condition_;
};

absl::StatusOr<std::unique_ptr<ControlFlowKernel>> PlanIf(const Node& node,
                                                          const std::vector<TensorDesc>& inputs,
                                                          const KernelRegistry& registry,
                                                          const PlanOptions& options) {
  const Subgraph* branches[2] = {node.FindSubgraph("then_branch"),
                                 node.FindSubgraph("else_branch")};
  if (branches[0] == nullptr || branches[1] == nullptr) {
    return absl::InvalidArgumentError("needs both then_branch and else_branch");
  }
  if (inputs.empty() || !inputs[0].present) return absl::InvalidArgumentError("no condition");
  RETURN_IF_ERROR(CheckCondition(inputs[0], "the condition"));
  std::unique_ptr<ExecutionPlan> plans[2];
  const bool known = inputs[0].data != nullptr;
  const int chosen = known ? (ScalarTrue(inputs[0].data, inputs[0].dtype) ? 0 : 1) : -1;
  for (int b = 0; b < 2; ++b) {
    if (chosen >= 0 && b != chosen) continue;
    ASSIGN_OR_RETURN(plans[b], PlanSubgraph(*branches[b], {}, inputs, registry, options));
    if (plans[b]->outputs().size() != node.outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat(branches[b]->attribute, " has ",
                                                     plans[b]->outputs().size(),
                                                     " outputs, the node ", node.outputs.size()));
    }
  }
  const ExecutionPlan& first = chosen >= 0 ? *plans[chosen] : *plans[0];
  std::vector<TensorDesc> outputs;
  for (size_t j = 0; j < node.outputs.size(); ++j) {
    const PlanTensor& out = first.outputs()[j];
    if (chosen < 0) {
      const PlanTensor& other = plans[1]->outputs()[j];
      if (other.dtype != out.dtype) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", j, " is ", DataTypeName(out.dtype), " in then_branch, ",
                         DataTypeName(other.dtype), " in else_branch"));
      }
      if (other.shape != out.shape) {
        return absl::FailedPreconditionError(absl::StrCat(
            "output ", j, " has shape ", ShapeToString(out.shape), " in then_branch and ",
            ShapeToString(other.shape),
            " in else_branch, and the condition is only known at run time (a plan for the "
            "condition's value is needed)"));
      }
    }
    TensorDesc desc;
    desc.dtype = out.dtype;
    desc.shape = out.shape;
    outputs.push_back(std::move(desc));
  }
  return std::unique_ptr<ControlFlowKernel>(new IfKernel(
      node, std::move(plans[0]), std::move(plans[1]), inputs[0].dtype, std::move(outputs)));
}

// ---------------------------------------------------------------------------------------------
// Loop

// The body's inputs: iteration number (int64 scalar), condition (bool scalar), the N
// loop-carried values; its outputs: condition, the N carried values, the K scan slices.
class LoopKernel : public ControlFlowKernel {
 public:
  LoopKernel(std::unique_ptr<ExecutionPlan> body, std::vector<size_t> outer, size_t num_carried,
             std::optional<int64_t> iterations, int64_t max_iterations, DataType m_dtype,
             DataType cond_dtype, std::vector<TensorDesc> outputs)
      : body_(std::move(body)),
        outer_(std::move(outer)),
        num_carried_(num_carried),
        iterations_(iterations),
        max_iterations_(max_iterations),
        m_dtype_(m_dtype),
        cond_dtype_(cond_dtype),
        outputs_(std::move(outputs)) {
    size_t scratch = 0;
    for (size_t k = 0; k < num_carried_; ++k) scratch += body_->inputs()[2 + k].bytes;
    scratch_.resize(scratch);
    begin_ = std::make_unique<HelperKernel>("Loop.begin", 1, [this](const KernelArgs& args) {
      return Begin(args.inputs, static_cast<uint32_t*>(args.outputs[0]));
    });
    next_ = std::make_unique<HelperKernel>(
        "Loop.next", outputs_.size() + 1, [this](const KernelArgs& args) {
          return Next(args.outputs, static_cast<uint32_t*>(args.outputs[outputs_.size()]));
        });
    end_ = std::make_unique<HelperKernel>("Loop.end", num_carried_, [this](const KernelArgs& args) {
      End(args.outputs);
      return absl::OkStatus();
    });
  }

  absl::string_view op() const override { return "Loop"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t owned_bytes() const override { return PlanBytes(*body_) + scratch_.size(); }

  absl::Status Run(const KernelArgs& args) const override {
    uint32_t go = 0;
    RETURN_IF_ERROR(Begin(args.inputs, &go));
    while (go != 0) {
      RETURN_IF_ERROR(InBody("body", body_->RunSteps()));
      RETURN_IF_ERROR(Next(args.outputs, &go));
    }
    End(args.outputs);
    return absl::OkStatus();
  }

  absl::Status Record(const PlanStep& step, Stream* stream,
                      const CaptureScope& scope) const override {
    ASSIGN_OR_RETURN(ConditionHandle condition,
                     scope.root->CreateCondition(0, /*assign_default=*/true));
    RETURN_IF_ERROR(Launch(stream, *begin_, step.inputs, {condition.value}));
    ASSIGN_OR_RETURN(std::vector<ModelRI*> bodies,
                     stream->AddConditional(ConditionalKind::kWhile, condition, 1));
    std::vector<void*> next_outputs = step.outputs;
    next_outputs.push_back(condition.value);
    absl::Status captured =
        CaptureBody(bodies[0], scope, [&](Stream* body, const CaptureScope& inner) {
          absl::Status enqueued = InBody("body", EnqueuePlan(*body_, body, &inner));
          return enqueued.ok() ? Launch(body, *next_, {}, next_outputs) : enqueued;
        });
    if (!captured.ok()) return captured;
    std::vector<void*> carried(step.outputs.begin(), step.outputs.begin() + num_carried_);
    return Launch(stream, *end_, {}, carried);
  }

 private:
  int64_t ReadCount(const void* m) const {
    if (m == nullptr) return std::numeric_limits<int64_t>::max();
    if (m_dtype_ == DataType::kInt32) return *static_cast<const int32_t*>(m);
    return *static_cast<const int64_t*>(m);
  }
  void SetIteration(int64_t iteration, bool condition) const {
    std::memcpy(body_->inputs()[0].data, &iteration, sizeof iteration);
    *body_->inputs()[1].data = condition ? 1 : 0;
  }

  // Stages the initial values and the outer values, and says whether a first iteration runs.
  absl::Status Begin(const void* const* inputs, uint32_t* go) const {
    trip_count_ = ReadCount(inputs[0]);
    const bool condition = inputs[1] == nullptr || ScalarTrue(inputs[1], cond_dtype_);
    for (size_t k = 0; k < num_carried_; ++k) {
      const PlanTensor& in = body_->inputs()[2 + k];
      CopyBytes(in.data, inputs[2 + k], in.bytes);
    }
    for (size_t k = 0; k < outer_.size(); ++k) {
      const PlanTensor& in = body_->inputs()[2 + num_carried_ + k];
      CopyBytes(in.data, inputs[outer_[k]], in.bytes);
    }
    iteration_ = 0;
    SetIteration(0, condition);
    *go = condition && trip_count_ > 0 ? 1 : 0;
    return absl::OkStatus();
  }

  // After one iteration of the body: writes the scan slices, moves the carried values back to
  // the body's inputs, and says whether another iteration runs.
  absl::Status Next(void* const* outputs, uint32_t* go) const {
    *go = 0;
    const bool condition = ScalarTrue(body_->outputs()[0].data, body_->outputs()[0].dtype);
    const size_t num_scans = outputs_.size() - num_carried_;
    if (num_scans > 0 && (!iterations_.has_value() || iteration_ >= *iterations_)) {
      return absl::InternalError(absl::StrCat("iteration ", iteration_,
                                              " is past the trip count the loop was planned for"));
    }
    for (size_t k = 0; k < num_scans; ++k) {
      const PlanTensor& slice = body_->outputs()[1 + num_carried_ + k];
      CopyBytes(static_cast<uint8_t*>(outputs[num_carried_ + k]) +
                    static_cast<size_t>(iteration_) * slice.bytes,
                slice.data, slice.bytes);
    }
    // Through the scratch: a carried output may be another carried value's input.
    uint8_t* at = scratch_.data();
    for (size_t k = 0; k < num_carried_; ++k) {
      const PlanTensor& out = body_->outputs()[1 + k];
      CopyBytes(at, out.data, out.bytes);
      at += out.bytes;
    }
    at = scratch_.data();
    for (size_t k = 0; k < num_carried_; ++k) {
      const PlanTensor& in = body_->inputs()[2 + k];
      CopyBytes(in.data, at, in.bytes);
      at += in.bytes;
    }
    ++iteration_;
    SetIteration(iteration_, condition);
    if (condition && iteration_ < trip_count_) {
      if (iteration_ >= max_iterations_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the loop ran ", iteration_, " iterations, the most one request may run"));
      }
      *go = 1;
    }
    return absl::OkStatus();
  }

  void End(void* const* outputs) const {
    for (size_t k = 0; k < num_carried_; ++k) {
      const PlanTensor& in = body_->inputs()[2 + k];
      CopyBytes(outputs[k], in.data, in.bytes);
    }
  }

  std::unique_ptr<ExecutionPlan> body_;
  std::vector<size_t> outer_;  // node input of each outer value the body reads
  size_t num_carried_;
  std::optional<int64_t> iterations_;  // the trip count planned for (scan outputs)
  int64_t max_iterations_;
  DataType m_dtype_, cond_dtype_;
  std::vector<TensorDesc> outputs_;
  // State of the run in progress (a plan runs one request at a time).
  mutable std::vector<uint8_t> scratch_;
  mutable int64_t iteration_ = 0;
  mutable int64_t trip_count_ = 0;
  std::unique_ptr<HelperKernel> begin_, next_, end_;
};

// A Loop's trip count M (one int32 or int64) and condition (one bool), where present.
absl::Status CheckTripCountAndCondition(const TensorDesc& m, const TensorDesc& cond) {
  if (m.present &&
      (NumElements(m.shape) != 1 || (m.dtype != DataType::kInt64 && m.dtype != DataType::kInt32))) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trip count must be one int64, got ", DescText(m.dtype, m.shape)));
  }
  if (cond.present) RETURN_IF_ERROR(CheckCondition(cond, "the condition"));
  return absl::OkStatus();
}

// The value of a known trip count (CheckTripCountAndCondition's types).
int64_t TripCount(const TensorDesc& m) {
  return m.dtype == DataType::kInt32 ? *static_cast<const int32_t*>(m.data)
                                     : *static_cast<const int64_t*>(m.data);
}

absl::StatusOr<std::unique_ptr<ControlFlowKernel>> PlanLoop(const Node& node,
                                                            const std::vector<TensorDesc>& inputs,
                                                            const KernelRegistry& registry,
                                                            const PlanOptions& options) {
  const Subgraph* body = node.FindSubgraph("body");
  if (body == nullptr) return absl::InvalidArgumentError("needs a body");
  if (body->num_formal_inputs < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body takes ", body->num_formal_inputs,
                     " inputs; it takes at least the iteration number and the condition"));
  }
  const size_t num_carried = body->num_formal_inputs - 2;
  if (inputs.size() < 2 + num_carried) {
    return absl::InvalidArgumentError(absl::StrCat("the body takes ", num_carried,
                                                   " loop-carried values, the node gives ",
                                                   static_cast<int64_t>(inputs.size()) - 2));
  }
  for (size_t at : body->outer_inputs) {
    if (at < 2 + num_carried) {
      return absl::InternalError("an outer value of the body is a formal input of the node");
    }
  }
  if (node.outputs.size() < num_carried) {
    return absl::InvalidArgumentError(absl::StrCat("the node has ", node.outputs.size(),
                                                   " outputs, fewer than its ", num_carried,
                                                   " loop-carried values"));
  }
  const TensorDesc& m = inputs[0];
  const TensorDesc& cond = inputs[1];
  RETURN_IF_ERROR(CheckTripCountAndCondition(m, cond));
  std::vector<TensorDesc> formal(2);
  formal[0].dtype = DataType::kInt64;
  formal[1].dtype = DataType::kBool;
  for (size_t k = 0; k < num_carried; ++k) {
    const TensorDesc& in = inputs[2 + k];
    if (!in.present) {
      return absl::InvalidArgumentError(absl::StrCat("loop-carried value ", k, " is absent"));
    }
    TensorDesc desc;
    desc.dtype = in.dtype;
    desc.shape = in.shape;
    formal.push_back(std::move(desc));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                   PlanSubgraph(*body, formal, inputs, registry, options));
  const size_t num_scans = node.outputs.size() - num_carried;
  if (plan->outputs().size() != 1 + num_carried + num_scans) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the body has ", plan->outputs().size(), " outputs, expected ", 1 + num_carried + num_scans,
        " (condition, ", num_carried, " loop-carried values, ", num_scans, " scan outputs)"));
  }
  const PlanTensor& cond_out = plan->outputs()[0];
  RETURN_IF_ERROR(CheckCondition(TensorDesc{cond_out.dtype, cond_out.shape, nullptr, true},
                                 "the body's condition output"));
  std::vector<TensorDesc> outputs;
  for (size_t k = 0; k < num_carried; ++k) {
    const PlanTensor& out = plan->outputs()[1 + k];
    if (out.dtype != formal[2 + k].dtype || out.shape != formal[2 + k].shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          "loop-carried value ", k, " enters the body as ",
          DescText(formal[2 + k].dtype, formal[2 + k].shape), " and leaves it as ",
          DescText(out.dtype, out.shape), " (a loop whose values change shape is not supported)"));
    }
    TensorDesc desc;
    desc.dtype = out.dtype;
    desc.shape = out.shape;
    outputs.push_back(std::move(desc));
  }
  // Scan outputs need the number of iterations now: a known trip count, and a condition that
  // the body passes through or sets to a constant.
  std::optional<int64_t> iterations;
  if (num_scans > 0) {
    const bool m_known = !m.present || m.data != nullptr;
    const bool cond_known = !cond.present || cond.data != nullptr;
    const bool passthrough = cond_out.data == plan->inputs()[1].data;
    if (m.present && m_known && cond_known && (passthrough || cond_out.known)) {
      const int64_t count = TripCount(m);
      const bool first = !cond.present || ScalarTrue(cond.data, cond.dtype);
      const bool again = passthrough || ScalarTrue(cond_out.data, cond_out.dtype);
      iterations = !first || count <= 0 ? 0 : again ? count : 1;
    }
    if (!iterations.has_value()) {
      return absl::FailedPreconditionError(
          "scan outputs need the number of iterations when planning: a trip count and a "
          "condition known then, and a body that passes the condition through or sets it "
          "to a constant (a plan for the input values is needed)");
    }
    if (*iterations > options.max_loop_iterations) {
      return absl::ResourceExhaustedError(absl::StrCat("the loop would run ", *iterations,
                                                       " iterations, more than the ",
                                                       options.max_loop_iterations, " allowed"));
    }
    for (size_t k = 0; k < num_scans; ++k) {
      const PlanTensor& out = plan->outputs()[1 + num_carried + k];
      TensorDesc desc;
      desc.dtype = out.dtype;
      desc.shape = {*iterations};
      desc.shape.insert(desc.shape.end(), out.shape.begin(), out.shape.end());
      if (!CheckedElementCount(desc.shape).has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("scan output ", k, " of shape ",
                                                       ShapeToString(desc.shape),
                                                       " overflows a 64-bit count"));
      }
      outputs.push_back(std::move(desc));
    }
  }
  std::vector<size_t> outer = body->outer_inputs;
  return std::unique_ptr<ControlFlowKernel>(
      new LoopKernel(std::move(plan), std::move(outer), num_carried, iterations,
                     options.max_loop_iterations, m.present ? m.dtype : DataType::kInt64,
                     cond.present ? cond.dtype : DataType::kBool, std::move(outputs)));
}

// The outputs of a Loop computed when planning (UnrollKnownLoop), as known values: Run copies
// them out (the planner computes the node at once, EvaluateOnHost); it is never captured.
class KnownOutputsKernel final : public ControlFlowKernel {
 public:
  explicit KnownOutputsKernel(std::vector<TensorValue> values) : values_(std::move(values)) {
    for (const TensorValue& v : values_) {
      outputs_.push_back(TensorDesc{v.dtype, v.shape, KnownData(v), true});
      owned_ += v.bytes.size() + (v.string_bytes != nullptr ? v.string_bytes->size() : 0);
    }
  }
  absl::string_view op() const override { return "Loop"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs& args) const override {
    for (size_t i = 0; i < values_.size(); ++i) {
      if (!values_[i].bytes.empty()) {
        std::memcpy(args.outputs[i], values_[i].bytes.data(), values_[i].bytes.size());
      }
    }
    return absl::OkStatus();
  }
  absl::Status Record(const PlanStep&, Stream*, const CaptureScope&) const override {
    return absl::InternalError("a Loop computed when planning is not captured");
  }
  size_t owned_bytes() const override { return owned_; }

 private:
  std::vector<TensorValue> values_;
  std::vector<TensorDesc> outputs_;
  size_t owned_ = 0;
};

// For each loop-carried value of `body`: true where each iteration only appends to it, so the
// body's carried output k is Concat(carried input k, ...) along axis 0 and nothing else reads
// either (`list = torch.cat((list, item))` in a scripted loop, as exported). `rank` is each
// carried value's rank on entry.
std::vector<bool> AppendedCarriedValues(const Subgraph& body, size_t num_carried,
                                        const std::vector<size_t>& rank) {
  std::vector<bool> appended(num_carried, false);
  const Graph& graph = *body.graph;
  if (graph.inputs.size() < 2 + num_carried || graph.outputs.size() < 1 + num_carried) {
    return appended;
  }
  absl::flat_hash_map<int, int> readers;
  for (const Node& node : graph.nodes) {
    for (int in : node.inputs) {
      if (in != Graph::kNoValue) ++readers[in];
    }
  }
  for (const GraphOutput& out : graph.outputs) ++readers[out.value];
  for (size_t k = 0; k < num_carried; ++k) {
    const int in = graph.inputs[2 + k];
    const int out = graph.outputs[1 + k].value;
    if (rank[k] == 0 || readers[in] != 1 || readers[out] != 1) continue;
    for (const Node& node : graph.nodes) {
      if (node.outputs.size() != 1 || node.outputs[0] != out) continue;
      auto axis = node.attributes.GetInt("axis", 1);
      const int64_t r = static_cast<int64_t>(rank[k]);
      appended[k] = node.op == "Concat" && node.domain.empty() && !node.inputs.empty() &&
                    node.inputs[0] == in && axis.ok() && (*axis == 0 || *axis == -r);
    }
  }
  return appended;
}

// A Loop whose every input is known when planning (a plan for the input values; the caller
// checks) computed there iteration by iteration, the body planned for each iteration's values,
// where planning the body once for all of them failed: a carried value that changes shape, or a
// Resize whose sizes each iteration computes (the mask and keypoint heads of torchvision's
// detection models). Bounded by max_loop_iterations, by max_unrolled_iterations over the whole
// plan (nested loops included) and, for the values it holds, by max_plan_bytes.
absl::StatusOr<std::unique_ptr<ControlFlowKernel>> UnrollKnownLoop(
    const Node& node, const std::vector<TensorDesc>& inputs, const KernelRegistry& registry,
    const PlanOptions& options) {
  const Subgraph* body = node.FindSubgraph("body");
  if (body == nullptr || body->num_formal_inputs < 2) {
    return absl::InvalidArgumentError("needs a body of the iteration number and condition");
  }
  const size_t num_carried = body->num_formal_inputs - 2;
  if (inputs.size() < 2 + num_carried || node.outputs.size() < num_carried) {
    return absl::InvalidArgumentError("the node's inputs or outputs do not match its body");
  }
  const TensorDesc& m = inputs[0];
  const TensorDesc& cond = inputs[1];
  RETURN_IF_ERROR(CheckTripCountAndCondition(m, cond));
  const int64_t trips = m.present ? TripCount(m) : std::numeric_limits<int64_t>::max();
  bool again = !cond.present || ScalarTrue(cond.data, cond.dtype);
  std::vector<TensorValue> carried;
  std::vector<size_t> ranks;
  for (size_t k = 0; k < num_carried; ++k) {
    const TensorDesc& in = inputs[2 + k];
    if (!in.present) {
      return absl::InvalidArgumentError(absl::StrCat("loop-carried value ", k, " is absent"));
    }
    carried.push_back(CopyTensorValue(in.dtype, in.shape, in.data));
    ranks.push_back(in.shape.size());
  }
  // A value each iteration appends to is kept here and the body is given none of it (zero rows
  // of the same shape otherwise): its Concat then yields just the rows to append. Each iteration
  // would otherwise copy the whole list again, quadratic in the iterations.
  std::vector<bool> appended = AppendedCarriedValues(*body, num_carried, ranks);
  std::vector<TensorValue> no_rows(num_carried);
  for (size_t k = 0; k < num_carried; ++k) {
    if (carried[k].dtype == DataType::kString) appended[k] = false;
    if (!appended[k]) continue;
    no_rows[k] = TensorValue{carried[k].dtype, carried[k].shape, {}};
    no_rows[k].shape[0] = 0;
  }
  const size_t num_scans = node.outputs.size() - num_carried;
  std::vector<std::vector<TensorValue>> scans(num_scans);
  int64_t held = 0;  // bytes of the scan slices and appended rows so far
  int64_t i = 0;
  for (; again && i < trips; ++i) {
    if (i >= options.max_loop_iterations) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the loop would run more than the ", options.max_loop_iterations, " iterations allowed"));
    }
    if (options.unrolled_iterations != nullptr &&
        ++*options.unrolled_iterations > options.max_unrolled_iterations) {
      return absl::ResourceExhaustedError(absl::StrCat("planning would compute more than the ",
                                                       options.max_unrolled_iterations,
                                                       " loop iterations allowed one by one"));
    }
    TensorValue number{DataType::kInt64, {}, ValueBytes(sizeof(int64_t))};
    std::memcpy(number.bytes.data(), &i, sizeof i);
    const TensorValue condition{DataType::kBool, {}, {uint8_t{1}}};
    std::vector<TensorDesc> formal = {
        TensorDesc{DataType::kInt64, {}, number.bytes.data(), true},
        TensorDesc{DataType::kBool, {}, condition.bytes.data(), true}};
    for (size_t k = 0; k < num_carried; ++k) {
      const TensorValue& v = appended[k] ? no_rows[k] : carried[k];
      formal.push_back(TensorDesc{v.dtype, v.shape, KnownData(v), true});
    }
    auto plan = PlanSubgraph(*body, formal, inputs, registry, options);
    if (!plan.ok()) return InBody(absl::StrCat("iteration ", i), plan.status());
    const std::vector<PlanTensor>& outs = (*plan)->outputs();
    if (outs.size() != 1 + num_carried + num_scans) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the body has ", outs.size(), " outputs, expected ", 1 + num_carried + num_scans));
    }
    for (const PlanTensor& out : outs) {
      if (!out.known) {
        return absl::FailedPreconditionError(absl::StrCat(
            "iteration ", i, ": the body's output \"", out.name, "\" is not known when planning"));
      }
    }
    RETURN_IF_ERROR(CheckCondition(TensorDesc{outs[0].dtype, outs[0].shape, outs[0].data, true},
                                   "the body's condition output"));
    again = ScalarTrue(outs[0].data, outs[0].dtype);
    for (size_t k = 0; k < num_carried; ++k) {
      const PlanTensor& out = outs[1 + k];
      if (out.dtype != carried[k].dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "loop-carried value ", k, " leaves the body as ", DataTypeName(out.dtype)));
      }
      if (!appended[k]) {
        carried[k] = CopyTensorValue(out.dtype, out.shape, out.data);
        continue;
      }
      // The Concat checked the other axes against no_rows[k]'s, which are carried[k]'s.
      TensorValue& list = carried[k];
      if (out.shape.size() != list.shape.size()) {
        return absl::InternalError(absl::StrCat("loop-carried value ", k, " changes rank"));
      }
      if (!CheckedAdd(list.shape[0], out.shape[0], &list.shape[0]) ||
          !CheckedAdd(held, static_cast<int64_t>(out.bytes), &held) ||
          (options.max_plan_bytes > 0 && held > options.max_plan_bytes)) {
        return absl::ResourceExhaustedError(absl::StrCat("loop-carried value ", k, " passes ",
                                                         options.max_plan_bytes,
                                                         " bytes in iteration ", i));
      }
      const uint8_t* rows = static_cast<const uint8_t*>(out.data);
      list.bytes.insert(list.bytes.end(), rows, rows + out.bytes);
    }
    for (size_t k = 0; k < num_scans; ++k) {
      const PlanTensor& out = outs[1 + num_carried + k];
      if (out.dtype == DataType::kString || (!scans[k].empty() && out.shape != scans[k][0].shape)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "scan output ", k, " is ", DescText(out.dtype, out.shape), " in iteration ", i,
            " (scan slices of strings or of changing shapes are not supported)"));
      }
      if (!CheckedAdd(held, static_cast<int64_t>(out.bytes), &held) ||
          (options.max_plan_bytes > 0 && held > options.max_plan_bytes)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the scan outputs pass ", options.max_plan_bytes, " bytes in iteration ", i));
      }
      scans[k].push_back(CopyTensorValue(out.dtype, out.shape, out.data));
    }
  }
  std::vector<TensorValue> values = std::move(carried);
  for (size_t k = 0; k < num_scans; ++k) {
    if (scans[k].empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no iteration ran, so scan output ", k, " has no known shape"));
    }
    TensorValue stacked{scans[k][0].dtype, {i}, {}};
    stacked.shape.insert(stacked.shape.end(), scans[k][0].shape.begin(), scans[k][0].shape.end());
    stacked.bytes.reserve(scans[k].size() * scans[k][0].bytes.size());
    for (const TensorValue& slice : scans[k]) {
      stacked.bytes.insert(stacked.bytes.end(), slice.bytes.begin(), slice.bytes.end());
    }
    values.push_back(std::move(stacked));
  }
  return std::unique_ptr<ControlFlowKernel>(new KnownOutputsKernel(std::move(values)));
}

}  // namespace

absl::StatusOr<Stream*> BodyStreams::At(size_t depth) {
  while (streams_.size() <= depth) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device_->CreateStream());
    streams_.push_back(std::move(stream));
  }
  return streams_[depth].get();
}

absl::StatusOr<std::unique_ptr<ControlFlowKernel>> PlanControlFlow(
    const Node& node, const std::vector<TensorDesc>& inputs, const KernelRegistry& registry,
    const PlanOptions& options) {
  // Bodies are captured on body streams of their own: their steps never fork.
  PlanOptions sub = options;
  sub.max_branch_streams = 1;
  if (node.op == "If") return PlanIf(node, inputs, registry, sub);
  if (node.op == "Loop") {
    auto planned = PlanLoop(node, inputs, registry, sub);
    const bool all_known = std::all_of(inputs.begin(), inputs.end(), [](const TensorDesc& in) {
      return !in.present || in.data != nullptr;
    });
    if (planned.ok() || !all_known) return planned;
    // Every input known: computed iteration by iteration now, where one plan of the body for all
    // iterations could not be made.
    auto unrolled = UnrollKnownLoop(node, inputs, registry, sub);
    if (unrolled.ok()) return unrolled;
    return absl::Status(
        planned.status().code(),
        absl::StrCat(planned.status().message(), "; computed iteration by iteration ",
                     "when planning: ", unrolled.status().message()));
  }
  return absl::UnimplementedError(absl::StrCat(node.op, " is not a control-flow op"));
}

absl::Status EnqueuePlan(const ExecutionPlan& plan, Stream* stream, const CaptureScope* scope) {
  if (scope != nullptr && scope->branches != nullptr && !plan.parallel_regions().empty()) {
    return EnqueueForked(plan, stream, scope->branches);
  }
  for (const PlanStep& step : plan.steps()) {
    absl::Status status =
        scope != nullptr && step.control != nullptr
            ? step.control->Record(step, stream, *scope)
            : stream->LaunchKernel(
                  *step.kernel,
                  std::span<const void* const>(step.inputs.data(), step.inputs.size()),
                  std::span<void* const>(step.outputs.data(), step.outputs.size()), step.workspace);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("node \"", step.node_name, "\" (", step.op,
                                                      "): ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace reprise::runtime::engine
