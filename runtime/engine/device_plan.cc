#include "runtime/engine/device_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/status_macros.h"

namespace reprise::runtime::engine {

absl::StatusOr<std::unique_ptr<DevicePlan>> DevicePlan::Create(const Model& model,
                                                               const ExecutionPlan& plan,
                                                               Device* device) {
  // String elements are host pointers (StringElement views): they cannot move to a device.
  bool strings = false;
  for (const PlanTensor& tensor : plan.inputs()) strings |= tensor.dtype == DataType::kString;
  for (const PlanTensor& tensor : plan.outputs()) strings |= tensor.dtype == DataType::kString;
  for (const PlanStep& step : plan.steps()) {
    for (const TensorDesc& out : step.kernel->outputs()) strings |= out.dtype == DataType::kString;
  }
  for (const auto& [id, constant] : model.graph().constants) {
    strings |= constant->dtype == DataType::kString;
  }
  if (strings) {
    return absl::UnimplementedError(
        "the model has string tensors, which only the CPU backend runs (docs/string-tensors.md)");
  }
  for (const PlanStep& step : plan.steps()) {
    if (step.control != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "node \"", step.node_name, "\" (", step.op,
          "): If and Loop run only on the CPU backend (their subgraphs' plans live in host "
          "memory)"));
    }
  }
  std::unique_ptr<DevicePlan> result(new DevicePlan(plan, device));
  for (const auto& [address, bytes] : plan.OwnedRegions()) {
    RETURN_IF_ERROR(result->Add(address, bytes, /*upload=*/true));
  }
  for (const auto& [id, constant] : model.graph().constants) {
    RETURN_IF_ERROR(result->Add(constant->bytes.data(), constant->bytes.size(), true));
  }
  // Inputs and outputs after the plan's own regions: an output that is a constant or a staged
  // input maps into that region.
  for (const PlanTensor& tensor : plan.inputs()) {
    RETURN_IF_ERROR(result->Add(tensor.data, tensor.bytes, false));
  }
  for (const PlanTensor& tensor : plan.outputs()) {
    RETURN_IF_ERROR(result->Add(tensor.data, tensor.bytes, true));
  }
  for (const PlanStep& step : plan.steps()) {
    Step mapped;
    mapped.kernel = step.kernel;
    for (const void* ptr : step.inputs) {
      ASSIGN_OR_RETURN(void* device_ptr, result->Map(ptr));
      mapped.inputs.push_back(device_ptr);
    }
    for (void* ptr : step.outputs) {
      ASSIGN_OR_RETURN(void* device_ptr, result->Map(ptr));
      mapped.outputs.push_back(device_ptr);
    }
    ASSIGN_OR_RETURN(mapped.workspace, result->Map(step.workspace));
    result->steps_.push_back(std::move(mapped));
  }
  auto stage = [&](const std::vector<PlanTensor>& tensors,
                   std::vector<Staged>* staged) -> absl::Status {
    for (const PlanTensor& tensor : tensors) {
      Staged s;
      s.bytes = tensor.bytes;
      s.dtype = tensor.dtype;
      s.shape = tensor.shape;
      ASSIGN_OR_RETURN(s.pinned, device->MallocHost(std::max<size_t>(tensor.bytes, 1)));
      ASSIGN_OR_RETURN(s.device, result->Map(tensor.data));
      staged->push_back(std::move(s));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(stage(plan.inputs(), &result->inputs_));
  RETURN_IF_ERROR(stage(plan.outputs(), &result->outputs_));
  return result;
}

DevicePlan::~DevicePlan() {
  for (const Staged& s : inputs_) (void)device_->FreeHost(s.pinned);
  for (const Staged& s : outputs_) (void)device_->FreeHost(s.pinned);
  for (const auto& [host, region] : regions_) (void)device_->Free(region.device);
}

absl::Status DevicePlan::Add(const void* host, size_t bytes, bool upload) {
  if (host == nullptr) return absl::OkStatus();
  const auto address = reinterpret_cast<uintptr_t>(host);
  auto it = regions_.upper_bound(address);
  if (it != regions_.begin() && address < std::prev(it)->first + std::prev(it)->second.bytes) {
    return absl::OkStatus();  // inside a region already relocated
  }
  ASSIGN_OR_RETURN(void* device_ptr, device_->Malloc(std::max<size_t>(bytes, 1)));
  regions_[address] = Region{bytes, device_ptr};
  device_bytes_ += bytes;
  if (upload && bytes > 0) {
    RETURN_IF_ERROR(device_->Memcpy(device_ptr, host, bytes, CopyKind::kHostToDevice));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> DevicePlan::Map(const void* host) const {
  if (host == nullptr) return nullptr;
  const auto address = reinterpret_cast<uintptr_t>(host);
  auto it = regions_.upper_bound(address);
  if (it != regions_.begin()) {
    --it;
    // The end address of a region is allowed (a zero-size tensor placed at its end).
    if (address <= it->first + it->second.bytes) {
      return static_cast<char*>(it->second.device) + (address - it->first);
    }
  }
  return absl::InternalError(
      absl::StrFormat("device plan: pointer %p of a step is in no relocated buffer", host));
}

absl::Status DevicePlan::StageInput(size_t index, const TensorValue& value) {
  if (index >= inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device plan: no input ", index, " (", inputs_.size(), " inputs)"));
  }
  const Staged& s = inputs_[index];
  if (value.dtype != s.dtype || value.bytes.size() != s.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("device plan: input \"", plan_.inputs()[index].name, "\" is ",
                     DataTypeName(s.dtype), " ", ShapeToString(s.shape), ", got ",
                     DataTypeName(value.dtype), " ", ShapeToString(value.shape)));
  }
  std::memcpy(s.pinned, value.bytes.data(), s.bytes);
  return absl::OkStatus();
}

absl::Status DevicePlan::Enqueue(Stream* stream) const {
  for (const Staged& s : inputs_) {
    if (s.bytes == 0) continue;
    RETURN_IF_ERROR(stream->MemcpyAsync(s.device, s.pinned, s.bytes, CopyKind::kHostToDevice));
  }
  for (const Step& step : steps_) {
    RETURN_IF_ERROR(stream->LaunchKernel(*step.kernel, step.inputs, step.outputs, step.workspace));
  }
  for (const Staged& s : outputs_) {
    if (s.bytes == 0) continue;
    RETURN_IF_ERROR(stream->MemcpyAsync(s.pinned, s.device, s.bytes, CopyKind::kDeviceToHost));
  }
  return absl::OkStatus();
}

TensorValue DevicePlan::ReadOutput(size_t index) const {
  const Staged& s = outputs_[index];
  TensorValue value{s.dtype, s.shape, {}};
  const auto* bytes = static_cast<const uint8_t*>(s.pinned);
  value.bytes.assign(bytes, bytes + s.bytes);
  return value;
}

void DevicePlan::FillOutputs(uint8_t byte) {
  for (const Staged& s : outputs_) std::memset(s.pinned, byte, s.bytes);
}

}  // namespace reprise::runtime::engine
