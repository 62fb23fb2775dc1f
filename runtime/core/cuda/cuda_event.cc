#include "runtime/core/cuda/cuda_event.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cuda/cuda_device.h"
#include "runtime/core/cuda/cuda_util.h"

namespace reprise::runtime::cuda {

absl::StatusOr<std::unique_ptr<CudaEvent>> CudaEvent::Create(CudaDevice* device, EventFlags flags) {
  RETURN_IF_ERROR(device->Activate());
  cudaEvent_t event = nullptr;
  RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
  return std::unique_ptr<CudaEvent>(new CudaEvent(device, event, flags == EventFlags::kExternal));
}

CudaEvent::~CudaEvent() { (void)cudaEventDestroy(event_); }

absl::Status CudaEvent::CheckSync(absl::string_view call) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  std::shared_ptr<CudaCapture> capture = recorded_in.lock();
  return CheckEventSyncLocked(capture.get(), call);
}

absl::Status CudaEvent::Synchronize() {
  RETURN_IF_ERROR(CheckSync("event synchronize"));
  ScopedCudaRelaxed relaxed;
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

absl::StatusOr<bool> CudaEvent::Query() {
  RETURN_IF_ERROR(CheckSync("event query"));
  ScopedCudaRelaxed relaxed;
  const cudaError_t error = cudaEventQuery(event_);
  if (error == cudaErrorNotReady) return false;
  RETURN_IF_ERROR(CudaStatus(error, "cudaEventQuery"));
  return true;
}

}  // namespace reprise::runtime::cuda
