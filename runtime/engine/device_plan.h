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

/// The steps of `plan` with every pointer mapped into `device` memory: the arena, the input
/// staging and output buffers and the values computed at plan time get device buffers
/// (ExecutionPlan::OwnedRegions), and the model's constants are uploaded. Inputs and outputs
/// are staged through pinned host memory (Device::MallocHost), so the copies are asynchronous
/// and can be captured.
///
/// Lifetime: borrows `model`, `plan` (its kernels) and `device`, which must outlive it.
/// Thread-safety: one request at a time (like the plan); Enqueue may be captured once and the
/// instance replayed, as long as the DevicePlan lives.
class DevicePlan {
 public:
  /// Relocates `plan` (made by `model` with `device`'s kernel registry). Allocation and upload
  /// happen here: call it before any capture.
  static absl::StatusOr<std::unique_ptr<DevicePlan>> Create(const Model& model,
                                                            const ExecutionPlan& plan,
                                                            Device* device);
  ~DevicePlan();
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;

  /// Copies `value` into input `index`'s pinned staging buffer. Error naming the input when
  /// its type or size differs from the plan's.
  absl::Status StageInput(size_t index, const TensorValue& value);
  /// Enqueues on `stream`: the pinned inputs to the device, every step, the outputs back into
  /// pinned memory. The outputs are readable once the stream has reached this point.
  absl::Status Enqueue(Stream* stream) const;
  /// Output `index` from its pinned staging buffer.
  TensorValue ReadOutput(size_t index) const;
  /// Fills every pinned output buffer with `byte` (to see that a later run wrote them).
  void FillOutputs(uint8_t byte);

  size_t num_steps() const { return steps_.size(); }
  /// Device bytes allocated for the relocation.
  size_t device_bytes() const { return device_bytes_; }

 private:
  struct Region {
    size_t bytes = 0;
    void* device = nullptr;
  };
  struct Step {
    const PreparedKernel* kernel = nullptr;
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    void* workspace = nullptr;
  };
  struct Staged {
    void* pinned = nullptr;
    void* device = nullptr;
    size_t bytes = 0;
    DataType dtype = DataType::kUndefined;
    Shape shape;
  };

  DevicePlan(const ExecutionPlan& plan, Device* device) : plan_(plan), device_(device) {}
  absl::Status Add(const void* host, size_t bytes, bool upload);
  absl::StatusOr<void*> Map(const void* host) const;

  const ExecutionPlan& plan_;
  Device* const device_;
  std::map<uintptr_t, Region> regions_;
  std::vector<Step> steps_;
  std::vector<Staged> inputs_, outputs_;
  size_t device_bytes_ = 0;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_DEVICE_PLAN_H_
