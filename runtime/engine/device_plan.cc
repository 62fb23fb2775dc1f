#include "runtime/engine/device_plan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status_macros.h"

namespace reprise::runtime::engine {
namespace {

constexpr char kStringsRefused[] =
    "the model has string tensors, which only the CPU backend runs (docs/string-tensors.md)";

}  // namespace

DeviceRegions::~DeviceRegions() {
  for (const auto& [host, region] : regions_) (void)device_->Free(region.device);
}

absl::Status DeviceRegions::Add(const void* host, size_t bytes, bool upload) {
  if (host == nullptr) return absl::OkStatus();
  const auto address = reinterpret_cast<uintptr_t>(host);
  auto it = regions_.upper_bound(address);
  if (it != regions_.begin() && address < std::prev(it)->first + std::prev(it)->second.bytes) {
    return absl::OkStatus();  // inside a region already relocated
  }
  ASSIGN_OR_RETURN(void* device_ptr, device_->Malloc(std::max<size_t>(bytes, 1)));
  regions_[address] = Region{bytes, device_ptr};
  bytes_ += bytes;
  if (upload && bytes > 0) {
    RETURN_IF_ERROR(device_->Memcpy(device_ptr, host, bytes, CopyKind::kHostToDevice));
  }
  return absl::OkStatus();
}

void* DeviceRegions::Find(const void* host) const {
  if (host == nullptr) return nullptr;
  const auto address = reinterpret_cast<uintptr_t>(host);
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) return nullptr;
  --it;
  if (address > it->first + it->second.bytes) return nullptr;
  return static_cast<char*>(it->second.device) + (address - it->first);
}

absl::StatusOr<std::shared_ptr<const DeviceConstants>> DeviceConstants::Create(const Model& model,
                                                                               Device* device) {
  std::shared_ptr<DeviceConstants> constants(new DeviceConstants(device));
  for (const auto& [id, constant] : model.graph().constants) {
    if (constant->dtype == DataType::kString) return absl::UnimplementedError(kStringsRefused);
    RETURN_IF_ERROR(constants->regions_.Add(constant->bytes.data(), constant->bytes.size(), true));
  }
  return std::shared_ptr<const DeviceConstants>(std::move(constants));
}

absl::StatusOr<std::unique_ptr<DevicePlan>> DevicePlan::Create(
    const Model& model, const ExecutionPlan& plan, Device* device,
    std::shared_ptr<const DeviceConstants> constants) {
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
  if (strings) return absl::UnimplementedError(kStringsRefused);
  for (const PlanStep& step : plan.steps()) {
    if (step.control != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "node \"", step.node_name, "\" (", step.op,
          "): If and Loop run only on the CPU backend (their subgraphs' plans live in host "
          "memory)"));
    }
  }
  if (constants != nullptr && constants->device() != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device plan on ", device->name(), ": its constants are on ", constants->device()->name()));
  }
  std::unique_ptr<DevicePlan> result(new DevicePlan(device, std::move(constants)));
  for (const auto& [address, bytes] : plan.OwnedRegions()) {
    RETURN_IF_ERROR(result->Add(address, bytes, /*upload=*/true));
  }
  if (result->constants_ == nullptr) {
    for (const auto& [id, constant] : model.graph().constants) {
      RETURN_IF_ERROR(result->Add(constant->bytes.data(), constant->bytes.size(), true));
    }
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
  auto stage = [&](const std::vector<PlanTensor>& tensors, std::vector<PlanTensor>* pinned,
                   std::vector<void*>* on_device) -> absl::Status {
    for (const PlanTensor& tensor : tensors) {
      PlanTensor staged = tensor;
      ASSIGN_OR_RETURN(void* host, device->MallocHost(std::max<size_t>(tensor.bytes, 1)));
      staged.data = static_cast<uint8_t*>(host);
      pinned->push_back(std::move(staged));
      ASSIGN_OR_RETURN(void* device_ptr, result->Map(tensor.data));
      on_device->push_back(device_ptr);
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(stage(plan.inputs(), &result->inputs_, &result->input_device_));
  RETURN_IF_ERROR(stage(plan.outputs(), &result->outputs_, &result->output_device_));
  return result;
}

DevicePlan::~DevicePlan() {
  for (const PlanTensor& t : inputs_) (void)device_->FreeHost(t.data);
  for (const PlanTensor& t : outputs_) (void)device_->FreeHost(t.data);
  // regions_ frees this plan's device buffers; the shared constants stay with their owners.
}

absl::Status DevicePlan::Add(const void* host, size_t bytes, bool upload) {
  if (constants_ != nullptr && constants_->Find(host) != nullptr) return absl::OkStatus();
  return regions_.Add(host, bytes, upload);
}

absl::StatusOr<void*> DevicePlan::Map(const void* host) const {
  if (host == nullptr) return nullptr;
  if (void* mapped = regions_.Find(host); mapped != nullptr) return mapped;
  if (constants_ != nullptr) {
    if (void* mapped = constants_->Find(host); mapped != nullptr) return mapped;
  }
  return absl::InternalError(
      absl::StrFormat("device plan: pointer %p of a step is in no relocated buffer", host));
}

absl::Status DevicePlan::StageInput(size_t index, const TensorValue& value) {
  if (index >= inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device plan: no input ", index, " (", inputs_.size(), " inputs)"));
  }
  const PlanTensor& s = inputs_[index];
  if (value.dtype != s.dtype || value.bytes.size() != s.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("device plan: input \"", s.name, "\" is ", DataTypeName(s.dtype), " ",
                     ShapeToString(s.shape), ", got ", DataTypeName(value.dtype), " ",
                     ShapeToString(value.shape)));
  }
  if (s.bytes > 0) std::memcpy(s.data, value.bytes.data(), s.bytes);
  return absl::OkStatus();
}

absl::StatusOr<size_t> DevicePlan::StageView(size_t index, const InputView& view) {
  return StageViewInto(inputs_, index, view);
}

absl::Status DevicePlan::Enqueue(Stream* stream) const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].bytes == 0) continue;
    RETURN_IF_ERROR(stream->MemcpyAsync(input_device_[i], inputs_[i].data, inputs_[i].bytes,
                                        CopyKind::kHostToDevice));
  }
  for (const Step& step : steps_) {
    RETURN_IF_ERROR(stream->LaunchKernel(*step.kernel, step.inputs, step.outputs, step.workspace));
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].bytes == 0) continue;
    RETURN_IF_ERROR(stream->MemcpyAsync(outputs_[i].data, output_device_[i], outputs_[i].bytes,
                                        CopyKind::kDeviceToHost));
  }
  return absl::OkStatus();
}

TensorValue DevicePlan::ReadOutput(size_t index) const {
  const PlanTensor& s = outputs_[index];
  TensorValue value{s.dtype, s.shape, {}};
  value.bytes.assign(s.data, s.data + s.bytes);
  return value;
}

void DevicePlan::FillOutputs(uint8_t byte) {
  for (const PlanTensor& s : outputs_) std::memset(s.data, byte, s.bytes);
}

}  // namespace reprise::runtime::engine
