#include "kernels/cuda/cuda_kernel_state.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/op_kernel.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cuda {
namespace {

constexpr size_t kCublasWorkspace = 32u << 20;

}  // namespace

absl::Status BlasStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cublas status ", static_cast<int>(status)));
}

Blas::~Blas() {
  // On the handle's device; errors are ignored (nothing to report them to).
  int current = 0;
  const bool switched = cudaGetDevice(&current) == cudaSuccess && current != ordinal &&
                        cudaSetDevice(ordinal) == cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (handle != nullptr) (void)cublasDestroy(handle);
  }
  if (workspace != nullptr) (void)cudaFree(workspace);
  if (switched) (void)cudaSetDevice(current);
  (void)cudaGetLastError();
}

absl::StatusOr<std::shared_ptr<CudaKernelState>> CudaKernelState::Create() {
  std::shared_ptr<CudaKernelState> state(new CudaKernelState());
  RETURN_IF_ERROR(cpu::RegisterCpuKernels(&state->reference_));
  return state;
}

absl::StatusOr<Blas*> CudaKernelState::BlasForCurrentDevice() {
  int device = 0;
  RETURN_IF_ERROR(CheckLaunch(cudaGetDevice(&device), "cublas"));
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Blas>& blas = blas_[device];
  if (blas == nullptr) {
    auto created = std::make_unique<Blas>();
    created->ordinal = device;
    std::lock_guard<std::mutex> blas_lock(created->mu);
    RETURN_IF_ERROR(BlasStatus(cublasCreate(&created->handle), "cublasCreate"));
    RETURN_IF_ERROR(
        CheckLaunch(cudaMalloc(&created->workspace, kCublasWorkspace), "cublas workspace"));
    RETURN_IF_ERROR(
        BlasStatus(cublasSetWorkspace(created->handle, created->workspace, kCublasWorkspace),
                   "cublasSetWorkspace"));
    blas = std::move(created);
  }
  return blas.get();
}

absl::StatusOr<CudaKernelState*> CudaKernelStateOf(const runtime::PrepareContext& context) {
  auto* state = dynamic_cast<CudaKernelState*>(context.kernel_state.get());
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(context.op, " \"", context.name,
                     "\": the cuda kernels prepare only through a registry filled by "
                     "RegisterCudaKernels (its kernel state is missing)"));
  }
  return state;
}

}  // namespace reprise::kernels::cuda
