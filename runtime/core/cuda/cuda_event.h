// The CUDA backend's event: a cudaEvent_t (timing disabled) plus the capture it was recorded in.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_EVENT_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_EVENT_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "runtime/core/cuda/cuda_capture.h"
#include "runtime/core/event.h"

namespace reprise::runtime::cuda {

class CudaDevice;

/// See Event. CUDA semantics apply where they differ from CANN's (README.md): a wait issued
/// before any record does not wait, and a reset does nothing (every record replaces the state).
class CudaEvent final : public Event {
 public:
  static absl::StatusOr<std::unique_ptr<CudaEvent>> Create(CudaDevice* device, EventFlags flags);
  ~CudaEvent() override;

  bool external() const override { return external_; }
  absl::Status Synchronize() override;
  absl::StatusOr<bool> Query() override;

  cudaEvent_t handle() const { return event_; }
  CudaDevice* device() const { return device_; }

  /// The capture whose internal record this event last took (guarded by CaptureMutex()).
  std::weak_ptr<CudaCapture> recorded_in;

 private:
  CudaEvent(CudaDevice* device, cudaEvent_t event, bool external)
      : device_(device), event_(event), external_(external) {}
  /// Refuses (and invalidates) when the event was recorded inside an active capture.
  absl::Status CheckSync(absl::string_view call);

  CudaDevice* const device_;
  const cudaEvent_t event_;
  const bool external_;
};

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_EVENT_H_
