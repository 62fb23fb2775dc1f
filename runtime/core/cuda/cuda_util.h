// Small helpers shared by the CUDA backend: CUDA errors as absl::Status, and a scope that lets
// the backend's own (already checked) calls through CUDA's capture-mode rules.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_UTIL_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reprise::runtime::cuda {

/// OK for cudaSuccess; otherwise an error naming `what` and CUDA's name and message for `error`
/// (FAILED_PRECONDITION for capture errors, RESOURCE_EXHAUSTED for out-of-memory, UNAVAILABLE
/// for a missing driver or device, INTERNAL otherwise).
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

/// Switches the calling thread's CUDA capture mode to relaxed for the scope. The backend checks
/// Reprise's own capture rules (capture.h) first; the CUDA call that follows must then not be
/// refused by CUDA's rules, which differ (docs: runtime/core/cuda/README.md).
class ScopedCudaRelaxed {
 public:
  ScopedCudaRelaxed();
  ~ScopedCudaRelaxed();
  ScopedCudaRelaxed(const ScopedCudaRelaxed&) = delete;
  ScopedCudaRelaxed& operator=(const ScopedCudaRelaxed&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

/// Number of CUDA devices, or the driver's error (e.g. "no CUDA-capable device is detected").
absl::Status CudaDeviceCount(int* count);

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_UTIL_H_
