// The CUDA kernel library: every op below enqueues onto a CUDA stream (runtime/core/cuda).
#ifndef REPRISE_KERNELS_CUDA_CUDA_KERNELS_H_
#define REPRISE_KERNELS_CUDA_CUDA_KERNELS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cuda {

/// Registers the CUDA kernels into `registry` (a CUDA device's) and installs their state
/// (kernels/cuda/cuda_kernel_state.h: the CPU reference kernels and the device's cuBLAS handle).
/// Output shapes and attribute checks come from the CPU kernels' Prepare (the reference), so both
/// backends agree on them; the CUDA side supports float32 compute (int64 / int32 / bool for
/// copies, Cast and Gather). Kernels that need cuBLAS create the device's handle at Prepare,
/// never during a capture; it is destroyed with the registry's state.
absl::Status RegisterCudaKernels(runtime::KernelRegistry* registry);

/// The op names RegisterCudaKernels registers, sorted.
std::vector<std::string> CudaKernelOps();

}  // namespace reprise::kernels::cuda

#endif  // REPRISE_KERNELS_CUDA_CUDA_KERNELS_H_
