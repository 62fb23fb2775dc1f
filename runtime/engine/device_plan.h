// An ExecutionPlan relocated into a device's memory: the engine plans in host memory; a device
// backend (CUDA) runs the same steps on device copies of every buffer.
#ifndef REPRISE_RUNTIME_ENGINE_DEVICE_PLAN_H_
#define REPRISE_RUNTIME_ENGINE_DEVICE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine {

/// Host regions copied into a device's memory, looked up by host address: what a DevicePlan
/// relocates its steps' pointers with.
class DeviceRegions {
 public:
  explicit DeviceRegions(Device* device) : device_(device) {}
  ~DeviceRegions();
  DeviceRegions(const DeviceRegions&) = delete;
  DeviceRegions& operator=(const DeviceRegions&) = delete;

  /// Allocates `bytes` on the device for the host region at `host` (copying it there when
  /// `upload`), unless `host` is null or already inside a region. Synchronous: not during a
  /// capture.
  absl::Status Add(const void* host, size_t bytes, bool upload);
  /// The device address of `host` (null for null); nullptr when no region holds it. The end
  /// address of a region counts as inside it (a zero-size tensor placed at its end).
  void* Find(const void* host) const;
  /// Device bytes allocated.
  size_t bytes() const { return bytes_; }

 private:
  struct Region {
    size_t bytes = 0;
    void* device = nullptr;
  };
  Device* const device_;
  std::map<uintptr_t, Region> regions_;
  size_t bytes_ = 0;
};

/// A model's constants (its graph's initializers and folded values) uploaded once to a device,
/// shared by every DevicePlan of the model on that device (all shapes, all streams).
///
/// Lifetime: borrows `device`, which must outlive it; the model need not (the copies are the
/// device's). Thread-safety: immutable after Create; any thread may read it.
class DeviceConstants {
 public:
  /// Uploads every constant of `model`'s graph (synchronous copies: not during a capture).
  /// UNIMPLEMENTED for a string constant (its elements are host pointers).
  static absl::StatusOr<std::shared_ptr<const DeviceConstants>> Create(const Model& model,
                                                                       Device* device);
  /// The device address of a host address inside a constant; nullptr when it is in none.
  void* Find(const void* host) const { return regions_.Find(host); }
  Device* device() const { return device_; }
  size_t bytes() const { return regions_.bytes(); }

 private:
  explicit DeviceConstants(Device* device) : device_(device), regions_(device) {}
  Device* const device_;
  DeviceRegions regions_;
};

/// The steps of `plan` with every pointer mapped into `device` memory: the arena, the input
/// staging and output buffers and the values computed at plan time get device buffers
/// (ExecutionPlan::OwnedRegions), and the model's constants are uploaded (or taken from a
/// shared DeviceConstants). Inputs and outputs are staged through pinned host memory
/// (Device::MallocHost), so the copies are asynchronous and can be captured: Enqueue records
/// H2D copies of the inputs, the steps, and D2H copies of the outputs.
///
/// Lifetime: borrows `plan` (its kernels) and `device`, which must outlive it, and keeps the
/// shared constants alive; the model is read during Create only (its constants are copied).
/// Thread-safety: one request at a time (like the plan); Enqueue may be captured once and the
/// instance replayed, as long as the DevicePlan lives.
class DevicePlan {
 public:
  /// Relocates `plan` (made by `model` with `device`'s kernel registry). Allocation and upload
  /// happen here: call it before any capture. `constants`: the model's constants already on
  /// `device` (DeviceConstants::Create); null: this plan uploads its own copy. UNIMPLEMENTED
  /// for string tensors and for If / Loop steps (their plans live in host memory).
  static absl::StatusOr<std::unique_ptr<DevicePlan>> Create(
      const Model& model, const ExecutionPlan& plan, Device* device,
      std::shared_ptr<const DeviceConstants> constants = nullptr);
  ~DevicePlan();
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;

  /// Copies `value` into input `index`'s pinned staging buffer. Error naming the input when
  /// its type or size differs from the plan's.
  absl::Status StageInput(size_t index, const TensorValue& value);
  /// The request path's staging (as ExecutionPlan::StageView): `view`'s pieces into input
  /// `index`'s pinned buffer, the rest zeroed. OUT_OF_RANGE when they hold more than the
  /// buffer. Returns the bytes copied.
  absl::StatusOr<size_t> StageView(size_t index, const InputView& view);
  /// Enqueues on `stream`: the pinned inputs to the device, every step, the outputs back into
  /// pinned memory. The outputs are readable once the stream has reached this point.
  absl::Status Enqueue(Stream* stream) const;
  /// The plan's outputs with `data` in pinned host memory (valid while the DevicePlan lives;
  /// written by each run's D2H copies).
  const std::vector<PlanTensor>& outputs() const { return outputs_; }
  /// Output `index` copied from its pinned staging buffer.
  TensorValue ReadOutput(size_t index) const;
  /// Fills every pinned output buffer with `byte` (to see that a later run wrote them).
  void FillOutputs(uint8_t byte);

  size_t num_steps() const { return steps_.size(); }
  /// Device bytes allocated for this plan (its shared constants not included).
  size_t device_bytes() const { return regions_.bytes(); }

 private:
  struct Step {
    const PreparedKernel* kernel = nullptr;
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    void* workspace = nullptr;
  };

  DevicePlan(Device* device, std::shared_ptr<const DeviceConstants> constants)
      : device_(device), constants_(std::move(constants)), regions_(device) {}
  absl::Status Add(const void* host, size_t bytes, bool upload);
  absl::StatusOr<void*> Map(const void* host) const;

  Device* const device_;
  std::shared_ptr<const DeviceConstants> constants_;  // may be null
  DeviceRegions regions_;                             // this plan's own buffers
  std::vector<Step> steps_;
  // The plan's inputs and outputs with `data` in pinned memory, and their device buffers.
  std::vector<PlanTensor> inputs_, outputs_;
  std::vector<void*> input_device_, output_device_;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_DEVICE_PLAN_H_
