// Element-wise, broadcast, copy-like and gather kernels (one thread per output element).
#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

namespace reprise::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;  // grid-stride loops cover the rest
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

__device__ void Offsets(const StridedView& v, int64_t index, int64_t* a, int64_t* b) {
  int64_t oa = v.a_offset, ob = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    const int64_t c = index % v.shape[d];
    index /= v.shape[d];
    oa += c * v.a_stride[d];
    ob += c * v.b_stride[d];
  }
  *a = oa;
  *b = ob;
}

template <BinaryOp kOp>
__global__ void BinaryKernel(StridedView v, int64_t count, const float* a, const float* b,
                             float* out, float alpha) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    Offsets(v, i, &ia, &ib);
    const float x = a[ia], y = b[ib];
    float r;
    if constexpr (kOp == BinaryOp::kAdd) r = x + y * alpha;
    if constexpr (kOp == BinaryOp::kSub) r = x - y * alpha;
    if constexpr (kOp == BinaryOp::kMul) r = x * y;
    if constexpr (kOp == BinaryOp::kDiv) r = x / y;
    if constexpr (kOp == BinaryOp::kMax) r = fmaxf(x, y);
    if constexpr (kOp == BinaryOp::kMin) r = fminf(x, y);
    if constexpr (kOp == BinaryOp::kPow) r = powf(x, y);
    out[i] = r;
  }
}

__device__ float Gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

template <UnaryOp kOp>
__global__ void UnaryKernel(int64_t count, const float* in, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = in[i];
    float r = x;
    if constexpr (kOp == UnaryOp::kRelu) r = x > 0.0f ? x : 0.0f;
    if constexpr (kOp == UnaryOp::kSigmoid) r = 1.0f / (1.0f + expf(-x));
    if constexpr (kOp == UnaryOp::kTanh) r = tanhf(x);
    if constexpr (kOp == UnaryOp::kExp) r = expf(x);
    if constexpr (kOp == UnaryOp::kLog) r = logf(x);
    if constexpr (kOp == UnaryOp::kSqrt) r = sqrtf(x);
    if constexpr (kOp == UnaryOp::kNeg) r = -x;
    if constexpr (kOp == UnaryOp::kAbs) r = fabsf(x);
    if constexpr (kOp == UnaryOp::kErf) r = erff(x);
    if constexpr (kOp == UnaryOp::kReciprocal) r = 1.0f / x;
    if constexpr (kOp == UnaryOp::kGelu) r = Gelu(x);
    out[i] = r;
  }
}

__global__ void ClampKernel(int64_t count, const float* in, float* out, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = fminf(fmaxf(in[i], lo), hi);
  }
}

template <typename T>
__global__ void StridedCopyKernel(StridedView v, int64_t count, const T* a, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ia = v.a_offset, io = 0, index = i;
    for (int d = v.ndim - 1; d >= 0; --d) {
      const int64_t c = index % v.shape[d];
      index /= v.shape[d];
      ia += c * v.a_stride[d];
      io += c * v.out_stride[d];
    }
    out[io] = a[ia];
  }
}

template <typename From, typename To>
__global__ void CastKernel(int64_t count, const From* in, To* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<To>(in[i]);
  }
}

template <typename T>
__global__ void GatherKernel(int64_t outer, int64_t axis_size, int64_t num_indices, int64_t inner,
                             const T* data, const int64_t* indices, T* out) {
  const int64_t count = outer * num_indices * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i % inner;
    const int64_t k = (i / inner) % num_indices;
    const int64_t o = i / (inner * num_indices);
    int64_t index = indices[k];
    if (index < 0) index += axis_size;
    out[i] = (index >= 0 && index < axis_size) ? data[(o * axis_size + index) * inner + n] : T{};
  }
}

__global__ void ChannelAffineKernel(int64_t count, int64_t channels, int64_t inner, const float* x,
                                    const float* scale, const float* bias, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    out[i] = x[i] * (scale != nullptr ? scale[c] : 1.0f) + (bias != nullptr ? bias[c] : 0.0f);
  }
}

template <typename From, typename To>
cudaError_t Cast(int64_t count, const void* in, void* out, cudaStream_t stream) {
  CastKernel<From, To><<<Blocks(count), kThreads, 0, stream>>>(count, static_cast<const From*>(in),
                                                               static_cast<To*>(out));
  return cudaGetLastError();
}

template <typename From>
cudaError_t CastFrom(int to, int64_t count, const void* in, void* out, cudaStream_t stream) {
  switch (to) {
    case 0:
      return Cast<From, float>(count, in, out, stream);
    case 1:
      return Cast<From, int64_t>(count, in, out, stream);
    case 2:
      return Cast<From, int32_t>(count, in, out, stream);
    case 3:
      return Cast<From, uint8_t>(count, in, out, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchBinaryF32(BinaryOp op, const StridedView& view, int64_t count, const float* a,
                            const float* b, float* out, float alpha, cudaStream_t stream) {
  const unsigned blocks = Blocks(count);
  switch (op) {
#define REPRISE_BINARY_CASE(k)                                                                 \
  case BinaryOp::k:                                                                            \
    BinaryKernel<BinaryOp::k><<<blocks, kThreads, 0, stream>>>(view, count, a, b, out, alpha); \
    break;
    REPRISE_BINARY_CASE(kAdd)
    REPRISE_BINARY_CASE(kSub)
    REPRISE_BINARY_CASE(kMul)
    REPRISE_BINARY_CASE(kDiv)
    REPRISE_BINARY_CASE(kMax)
    REPRISE_BINARY_CASE(kMin)
    REPRISE_BINARY_CASE(kPow)
#undef REPRISE_BINARY_CASE
  }
  return cudaGetLastError();
}

cudaError_t LaunchUnaryF32(UnaryOp op, int64_t count, const float* in, float* out,
                           cudaStream_t stream) {
  const unsigned blocks = Blocks(count);
  switch (op) {
#define REPRISE_UNARY_CASE(k)                                                 \
  case UnaryOp::k:                                                            \
    UnaryKernel<UnaryOp::k><<<blocks, kThreads, 0, stream>>>(count, in, out); \
    break;
    REPRISE_UNARY_CASE(kRelu)
    REPRISE_UNARY_CASE(kSigmoid)
    REPRISE_UNARY_CASE(kTanh)
    REPRISE_UNARY_CASE(kExp)
    REPRISE_UNARY_CASE(kLog)
    REPRISE_UNARY_CASE(kSqrt)
    REPRISE_UNARY_CASE(kNeg)
    REPRISE_UNARY_CASE(kAbs)
    REPRISE_UNARY_CASE(kErf)
    REPRISE_UNARY_CASE(kReciprocal)
    REPRISE_UNARY_CASE(kIdentity)
    REPRISE_UNARY_CASE(kGelu)
#undef REPRISE_UNARY_CASE
  }
  return cudaGetLastError();
}

cudaError_t LaunchClampF32(int64_t count, const float* in, float* out, float lo, float hi,
                           cudaStream_t stream) {
  ClampKernel<<<Blocks(count), kThreads, 0, stream>>>(count, in, out, lo, hi);
  return cudaGetLastError();
}

cudaError_t LaunchStridedCopy(const StridedView& view, int64_t count, size_t element_size,
                              const void* a, void* out, cudaStream_t stream) {
  const unsigned blocks = Blocks(count);
  switch (element_size) {
    case 1:
      StridedCopyKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(
          view, count, static_cast<const uint8_t*>(a), static_cast<uint8_t*>(out));
      break;
    case 2:
      StridedCopyKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
          view, count, static_cast<const uint16_t*>(a), static_cast<uint16_t*>(out));
      break;
    case 4:
      StridedCopyKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
          view, count, static_cast<const uint32_t*>(a), static_cast<uint32_t*>(out));
      break;
    case 8:
      StridedCopyKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(
          view, count, static_cast<const uint64_t*>(a), static_cast<uint64_t*>(out));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCast(int from, int to, int64_t count, const void* in, void* out,
                       cudaStream_t stream) {
  switch (from) {
    case 0:
      return CastFrom<float>(to, count, in, out, stream);
    case 1:
      return CastFrom<int64_t>(to, count, in, out, stream);
    case 2:
      return CastFrom<int32_t>(to, count, in, out, stream);
    case 3:
      return CastFrom<uint8_t>(to, count, in, out, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchGather(int64_t outer, int64_t axis_size, int64_t num_indices, int64_t inner,
                         size_t element_size, const void* data, const int64_t* indices, void* out,
                         cudaStream_t stream) {
  const unsigned blocks = Blocks(outer * num_indices * inner);
  switch (element_size) {
    case 4:
      GatherKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(outer, axis_size, num_indices, inner,
                                                              static_cast<const uint32_t*>(data),
                                                              indices, static_cast<uint32_t*>(out));
      break;
    case 8:
      GatherKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(outer, axis_size, num_indices, inner,
                                                              static_cast<const uint64_t*>(data),
                                                              indices, static_cast<uint64_t*>(out));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchChannelAffineF32(int64_t outer, int64_t channels, int64_t inner, const float* x,
                                   const float* scale, const float* bias, float* out,
                                   cudaStream_t stream) {
  const int64_t count = outer * channels * inner;
  ChannelAffineKernel<<<Blocks(count), kThreads, 0, stream>>>(count, channels, inner, x, scale,
                                                              bias, out);
  return cudaGetLastError();
}

cudaError_t LaunchAddChannelBiasF32(int64_t n, int64_t channels, int64_t inner, const float* bias,
                                    float* out, cudaStream_t stream) {
  const int64_t count = n * channels * inner;
  ChannelAffineKernel<<<Blocks(count), kThreads, 0, stream>>>(count, channels, inner, out, nullptr,
                                                              bias, out);
  return cudaGetLastError();
}

}  // namespace reprise::kernels::cuda
