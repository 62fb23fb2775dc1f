#include "runtime/engine/execution_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/core/string_tensor.h"

namespace reprise::runtime::engine {

absl::Status ExecutionPlan::StageInput(size_t index, const TensorValue& value) {
  if (index >= inputs_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("input index ", index, ", the plan has ", inputs_.size(), " inputs"));
  }
  const PlanTensor& input = inputs_[index];
  if (value.dtype != input.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input \"", input.name, "\" has element type ",
                                                   DataTypeName(value.dtype), ", expected ",
                                                   DataTypeName(input.dtype)));
  }
  if (value.shape != input.shape) {
    return absl::InvalidArgumentError(absl::StrCat("input \"", input.name, "\" has shape ",
                                                   ShapeToString(value.shape), ", the plan is for ",
                                                   ShapeToString(input.shape)));
  }
  if (value.bytes.size() != input.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input \"", input.name, "\" has ", value.bytes.size(), " bytes, shape ",
        ShapeToString(input.shape), " of ", DataTypeName(input.dtype), " needs ", input.bytes));
  }
  if (input.fixed_value != nullptr && input.bytes > 0 &&
      std::memcmp(input.fixed_value, value.bytes.data(), input.bytes) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input \"", input.name,
                     "\" differs from the value this plan was made for (its value "
                     "decides shapes, so each value needs its own plan)"));
  }
  kernels::cpu::ParallelCopy(input.data, value.bytes.data(), input.bytes, intra_op_threads_);
  return absl::OkStatus();
}

absl::StatusOr<size_t> StageViewInto(const std::vector<PlanTensor>& inputs, size_t index,
                                     const InputView& view, int threads) {
  if (index >= inputs.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("input index ", index, ", the plan has ", inputs.size(), " inputs"));
  }
  const PlanTensor& input = inputs[index];
  const size_t given = view.piece_bytes();
  if (given > input.bytes) {
    return absl::OutOfRangeError(
        absl::StrCat("input \"", input.name, "\" has ", given, " bytes, its buffer ", input.bytes));
  }
  view.CopyTo(input.data, input.bytes, [threads](void* to, const void* from, size_t bytes) {
    kernels::cpu::ParallelCopy(to, from, bytes, threads);
  });
  // A value-keyed plan runs only the value it was made for (its key may be a digest of it).
  // String views point at each request's own bytes: not compared.
  if (input.fixed_value != nullptr && input.dtype != DataType::kString && input.bytes > 0 &&
      std::memcmp(input.fixed_value, input.data, input.bytes) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input \"", input.name,
                     "\" differs from the value this plan was made for (its value decides "
                     "shapes, so each value needs its own plan)"));
  }
  return given;
}

absl::StatusOr<size_t> ExecutionPlan::StageView(size_t index, const InputView& view) {
  return StageViewInto(inputs_, index, view, intra_op_threads_);
}

absl::Status ExecutionPlan::UseArena(std::shared_ptr<AlignedBuffer> arena) {
  if (arena == nullptr) return absl::InvalidArgumentError("no arena given");
  if (arena->size() < arena_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arena of ", arena->size(), " bytes is smaller than the plan's ", arena_bytes_, " bytes"));
  }
  if (arena == arena_) return absl::OkStatus();
  const uint8_t* const begin = arena_->data();
  const uint8_t* const end = begin + arena_->size();
  uint8_t* const target = arena->data();
  auto rebase = [&](const void* p) -> void* {
    const auto* byte = static_cast<const uint8_t*>(p);
    if (byte == nullptr || byte < begin || byte >= end) return const_cast<void*>(p);
    return target + (byte - begin);
  };
  for (PlanStep& step : steps_) {
    for (const void*& input : step.inputs) input = rebase(input);
    for (void*& output : step.outputs) output = rebase(output);
    step.workspace = rebase(step.workspace);
  }
  for (PlanTensor& output : outputs_) output.data = static_cast<uint8_t*>(rebase(output.data));
  arena_ = std::move(arena);
  return absl::OkStatus();
}

absl::Status ExecutionPlan::RunSteps() const {
  for (const PlanStep& step : steps_) {
    KernelArgs args;
    args.inputs = step.inputs.data();
    args.outputs = step.outputs.data();
    args.workspace = step.workspace;
    absl::Status status = step.kernel->Run(args);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("node \"", step.node_name, "\" (", step.op,
                                                      "): ", status.message()));
    }
  }
  return absl::OkStatus();
}

TensorValue ExecutionPlan::ReadOutput(size_t index) const {
  const PlanTensor& out = outputs_[index];
  // Strings are copied out too: their views point into the plan or the staged inputs.
  return CopyTensorValue(out.dtype, out.shape, out.data);
}

absl::StatusOr<std::vector<NamedTensor>> ExecutionPlan::Run(
    const std::vector<const TensorValue*>& inputs) {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan takes ", inputs_.size(), " inputs, ", inputs.size(), " given"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) RETURN_IF_ERROR(StageInput(i, *inputs[i]));
  RETURN_IF_ERROR(RunSteps());
  std::vector<NamedTensor> outputs;
  outputs.reserve(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    outputs.push_back(NamedTensor{outputs_[i].name, ReadOutput(i)});
  }
  return outputs;
}

uint64_t ExecutionPlan::settling_runs() const {
  uint64_t most = 0;
  for (const PlanStep& step : steps_) {
    if (step.kernel != nullptr) most = std::max(most, step.kernel->settling_runs());
  }
  return most;
}

}  // namespace reprise::runtime::engine
