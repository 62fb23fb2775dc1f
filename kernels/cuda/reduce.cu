// Row-wise kernels: softmax, layer normalisation, reductions (one block per row), and the
// window kernels: pooling and im2col (one thread per output element).
#include <cuda_runtime.h>
#include <float.h>

#include "kernels/cuda/launch.h"

namespace reprise::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kThreads = 256;

unsigned Blocks(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Block-wide reduction of `value` (sum or max) through shared memory; every thread gets it.
template <bool kMax>
__device__ float BlockReduce(float value, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  if (warp == 0) {
    value = lane < warps ? shared[lane] : (kMax ? -FLT_MAX : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, value, offset);
      value = kMax ? fmaxf(value, other) : value + other;
    }
    if (lane == 0) shared[0] = value;
  }
  __syncthreads();
  const float result = shared[0];
  __syncthreads();
  return result;
}

// One block per (outer, inner) row of `n` elements with stride `inner`.
__global__ void SoftmaxKernel(int64_t n, int64_t inner, const float* in, float* out, bool log) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int64_t base = (row / inner) * n * inner + row % inner;
  float max_value = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    max_value = fmaxf(max_value, in[base + i * inner]);
  max_value = BlockReduce<true>(max_value, shared);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += expf(in[base + i * inner] - max_value);
  sum = BlockReduce<false>(sum, shared);
  const float log_sum = logf(sum);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float shifted = in[base + i * inner] - max_value;
    out[base + i * inner] = log ? shifted - log_sum : expf(shifted) / sum;
  }
}

__global__ void LayerNormKernel(int64_t n, const float* in, const float* scale, const float* bias,
                                float epsilon, float* out) {
  __shared__ float shared[32];
  const float* x = in + blockIdx.x * n;
  float* y = out + blockIdx.x * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += x[i];
  const float mean = BlockReduce<false>(sum, shared) / static_cast<float>(n);
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) squares += (x[i] - mean) * (x[i] - mean);
  const float variance = BlockReduce<false>(squares, shared) / static_cast<float>(n);
  const float inv = rsqrtf(variance + epsilon);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    y[i] = (x[i] - mean) * inv * scale[i] + (bias != nullptr ? bias[i] : 0.0f);
  }
}

__global__ void ReduceKernel(int kind, int64_t n, int64_t inner, const float* in, float* out) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int64_t base = (row / inner) * n * inner + row % inner;
  const bool max_like = kind >= 2;
  float value = kind == 2 ? -FLT_MAX : (kind == 3 ? FLT_MAX : 0.0f);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = in[base + i * inner];
    value = kind == 2 ? fmaxf(value, x) : (kind == 3 ? fminf(value, x) : value + x);
  }
  if (kind == 3) value = -value;  // min as max of negated values
  value = max_like ? BlockReduce<true>(value, shared) : BlockReduce<false>(value, shared);
  if (kind == 3) value = -value;
  if (threadIdx.x == 0) out[row] = kind == 1 ? value / static_cast<float>(n) : value;
}

__global__ void Pool2dKernel(int kind, Pool2d p, const float* in, float* out) {
  const int64_t count = p.n * p.c * p.out_h * p.out_w;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % p.out_w, oy = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
    const float* image = in + plane * p.h * p.w;
    float acc = kind == 0 ? -FLT_MAX : 0.0f;
    int64_t valid = 0;
    for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
      const int64_t y = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
        const int64_t x = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        if (y < 0 || y >= p.h || x < 0 || x >= p.w) continue;
        const float v = image[y * p.w + x];
        acc = kind == 0 ? fmaxf(acc, v) : acc + v;
        ++valid;
      }
    }
    if (kind == 1) {
      const int64_t divisor = p.count_include_pad ? p.kernel_h * p.kernel_w : valid;
      acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.0f;
    }
    out[i] = acc;
  }
}

// columns[(c * kh + ky) * kw + kx][oy * out_w + ox]
__global__ void Im2ColKernel(Conv2d p, int64_t channels, const float* image, float* columns) {
  const int64_t spatial = p.out_h * p.out_w;
  const int64_t count = channels * p.kernel_h * p.kernel_w * spatial;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = i % spatial, row = i / spatial;
    const int64_t kx = row % p.kernel_w, ky = (row / p.kernel_w) % p.kernel_h;
    const int64_t c = row / (p.kernel_w * p.kernel_h);
    const int64_t ox = s % p.out_w, oy = s / p.out_w;
    const int64_t y = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
    const int64_t x = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
    columns[i] = (y >= 0 && y < p.h && x >= 0 && x < p.w) ? image[(c * p.h + y) * p.w + x] : 0.0f;
  }
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(rows < 1 ? 1 : rows); }

}  // namespace

cudaError_t LaunchSoftmaxF32(int64_t outer, int64_t axis_size, int64_t inner, const float* in,
                             float* out, bool log, cudaStream_t stream) {
  SoftmaxKernel<<<RowBlocks(outer * inner), kRowThreads, 0, stream>>>(axis_size, inner, in, out,
                                                                      log);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormF32(int64_t rows, int64_t norm, const float* in, const float* scale,
                               const float* bias, float epsilon, float* out, cudaStream_t stream) {
  LayerNormKernel<<<RowBlocks(rows), kRowThreads, 0, stream>>>(norm, in, scale, bias, epsilon, out);
  return cudaGetLastError();
}

cudaError_t LaunchReduceF32(int kind, int64_t outer, int64_t reduce, int64_t inner, const float* in,
                            float* out, cudaStream_t stream) {
  ReduceKernel<<<RowBlocks(outer * inner), kRowThreads, 0, stream>>>(kind, reduce, inner, in, out);
  return cudaGetLastError();
}

cudaError_t LaunchPool2dF32(int kind, const Pool2d& p, const float* in, float* out,
                            cudaStream_t stream) {
  Pool2dKernel<<<Blocks(p.n * p.c * p.out_h * p.out_w), kThreads, 0, stream>>>(kind, p, in, out);
  return cudaGetLastError();
}

cudaError_t LaunchIm2ColF32(const Conv2d& p, int64_t channels_per_group, const float* image,
                            float* columns, cudaStream_t stream) {
  const int64_t count = channels_per_group * p.kernel_h * p.kernel_w * p.out_h * p.out_w;
  Im2ColKernel<<<Blocks(count), kThreads, 0, stream>>>(p, channels_per_group, image, columns);
  return cudaGetLastError();
}

}  // namespace reprise::kernels::cuda
