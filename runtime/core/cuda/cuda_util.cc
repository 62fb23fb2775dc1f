#include "runtime/core/cuda/cuda_util.h"

#include "absl/strings/str_cat.h"

namespace reprise::runtime::cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  // Clears a non-sticky error so that it is not reported again by the next call.
  (void)cudaGetLastError();
  const std::string message = absl::StrCat(what, " failed: ", cudaGetErrorName(error), " (",
                                           cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      return absl::UnavailableError(message);
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
    case cudaErrorGraphExecUpdateFailure:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

ScopedCudaRelaxed::ScopedCudaRelaxed() {
  previous_ = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&previous_);
}

ScopedCudaRelaxed::~ScopedCudaRelaxed() { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }

absl::Status CudaDeviceCount(int* count) {
  *count = 0;
  return CudaStatus(cudaGetDeviceCount(count), "cudaGetDeviceCount");
}

}  // namespace reprise::runtime::cuda
