// The kernel interface of the CUDA backend: a PreparedKernel that enqueues onto a CUDA stream.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_KERNEL_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_KERNEL_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime::cuda {

/// Kernels registered on a CUDA device implement Launch: it enqueues the work on `stream`
/// (kernels, cuBLAS / cuDNN calls, device-to-device copies) and returns at once; it must make
/// no synchronising or allocating CUDA call, so that it can be captured into a graph. Launch
/// errors are returned; execution errors surface at the stream's next Synchronize.
///
/// Run is the host interface: by default refused (a CUDA kernel runs on a CudaStream); a kernel
/// may override it to compute on host pointers (the engine folds plan-time values with it).
///
/// Thread-safety: Launch may be called from several threads at once.
class CudaKernel : public PreparedKernel {
 public:
  virtual absl::Status Launch(const KernelArgs& args, cudaStream_t stream) const = 0;
  absl::Status Run(const KernelArgs& args) const override;
};

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_KERNEL_H_
