#include <cuda_runtime.h>

#include "kernels/cuda/cuda_probe.h"

namespace reprise::kernels::cuda {
namespace {

__global__ void AddKernel(float* data, size_t n, float value) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] += value;
}

std::string ErrorString(cudaError_t error) {
  return error == cudaSuccess ? std::string() : std::string(cudaGetErrorString(error));
}

}  // namespace

int DeviceCount(std::string* why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why != nullptr) *why = ErrorString(error);
    return 0;
  }
  return count;
}

std::string AddOnDevice(float* data, size_t n, float value) {
  float* device = nullptr;
  cudaError_t error = cudaMalloc(&device, n * sizeof(float));
  if (error != cudaSuccess) return ErrorString(error);
  error = cudaMemcpy(device, data, n * sizeof(float), cudaMemcpyHostToDevice);
  if (error == cudaSuccess) {
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
    AddKernel<<<blocks, threads>>>(device, n, value);
    error = cudaGetLastError();
  }
  if (error == cudaSuccess) {
    error = cudaMemcpy(data, device, n * sizeof(float), cudaMemcpyDeviceToHost);
  }
  cudaFree(device);
  return ErrorString(error);
}

}  // namespace reprise::kernels::cuda
