// What the CUDA kernels keep per device: the CPU reference kernels and the cuBLAS handle.
// Internal to the CUDA kernels.
#ifndef REPRISE_KERNELS_CUDA_CUDA_KERNEL_STATE_H_
#define REPRISE_KERNELS_CUDA_CUDA_KERNEL_STATE_H_

#include <cublas_v2.h>

#include <map>
#include <memory>
#include <mutex>  // NOLINT: see docs/development.md (TSan)

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cuda {

/// One cuBLAS handle with a fixed workspace, so that cuBLAS allocates nothing while a capture
/// records its kernels. Calls on the handle are serialised (cublasSetStream + the call). The
/// destructor destroys the handle and frees the workspace.
struct Blas {
  Blas() = default;
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas();

  std::mutex mu;
  cublasHandle_t handle ABSL_GUARDED_BY(mu) = nullptr;
  void* workspace = nullptr;  // device memory of the handle's workspace
  int ordinal = 0;            // the device the handle was made on
};

/// The CUDA kernel library's state (runtime::KernelState), installed in a registry by
/// RegisterCudaKernels: the CPU kernels, as the reference for shapes and attribute checks (with
/// their own CpuKernelState), and the cuBLAS handle of each device the registry prepared on (one:
/// a registry is a device's). No handle is process-wide: they go with the state, which every
/// kernel using a handle keeps alive. Thread-safe.
class CudaKernelState final : public runtime::KernelState {
 public:
  /// The state with the CPU reference kernels registered; no handle yet.
  static absl::StatusOr<std::shared_ptr<CudaKernelState>> Create();
  ~CudaKernelState() override = default;
  CudaKernelState(const CudaKernelState&) = delete;
  CudaKernelState& operator=(const CudaKernelState&) = delete;

  const runtime::KernelRegistry& cpu_reference() const { return reference_; }
  /// The cuBLAS handle of the current device, made on first use (at Prepare, never during a
  /// capture). Error where no handle can be made (no device).
  absl::StatusOr<Blas*> BlasForCurrentDevice();

 private:
  CudaKernelState() = default;

  runtime::KernelRegistry reference_;  // filled by Create, read-only afterwards
  std::mutex mu_;
  std::map<int, std::unique_ptr<Blas>> blas_ ABSL_GUARDED_BY(mu_);  // by device ordinal
};

/// A cuBLAS status → OK or INTERNAL naming `what`.
absl::Status BlasStatus(cublasStatus_t status, absl::string_view what);

/// The state of the registry preparing `context` (borrowed from it); FAILED_PRECONDITION naming
/// the op outside a registry filled by RegisterCudaKernels.
absl::StatusOr<CudaKernelState*> CudaKernelStateOf(const runtime::PrepareContext& context);

}  // namespace reprise::kernels::cuda

#endif  // REPRISE_KERNELS_CUDA_CUDA_KERNEL_STATE_H_
