// Device-side helpers of the CUDA backend's conditional tasks (compiled by nvcc).
#ifndef REPRISE_RUNTIME_CORE_CUDA_CONDITION_KERNELS_H_
#define REPRISE_RUNTIME_CORE_CUDA_CONDITION_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace reprise::runtime::cuda {

/// Enqueues a one-thread kernel that sets the conditional handle `handle` from `*value`
/// (device memory) with cudaGraphSetConditional. Valid only inside a graph (captured).
cudaError_t LaunchSetCondition(cudaGraphConditionalHandle handle, const uint32_t* value,
                               cudaStream_t stream);

/// Enqueues a one-thread kernel that writes `value` into `*target` (device memory).
cudaError_t LaunchWriteValue(uint32_t* target, uint32_t value, cudaStream_t stream);

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CONDITION_KERNELS_H_
