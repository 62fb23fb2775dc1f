#include <cuda_runtime.h>

#include "runtime/core/cuda/condition_kernels.h"

namespace reprise::runtime::cuda {
namespace {

__global__ void SetConditionKernel(cudaGraphConditionalHandle handle, const uint32_t* value) {
  cudaGraphSetConditional(handle, *value);
}

__global__ void WriteValueKernel(uint32_t* target, uint32_t value) { *target = value; }

}  // namespace

cudaError_t LaunchSetCondition(cudaGraphConditionalHandle handle, const uint32_t* value,
                               cudaStream_t stream) {
  SetConditionKernel<<<1, 1, 0, stream>>>(handle, value);
  return cudaGetLastError();
}

cudaError_t LaunchWriteValue(uint32_t* target, uint32_t value, cudaStream_t stream) {
  WriteValueKernel<<<1, 1, 0, stream>>>(target, value);
  return cudaGetLastError();
}

}  // namespace reprise::runtime::cuda
