// Plain launch functions of the CUDA kernels (compiled by nvcc, no Abseil): each enqueues on
// `stream` and returns cudaGetLastError(). Shapes are passed as small fixed arrays.
#ifndef REPRISE_KERNELS_CUDA_LAUNCH_H_
#define REPRISE_KERNELS_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace reprise::kernels::cuda {

inline constexpr int kMaxDims = 8;

/// Element-wise over `ndim` dims of `shape`, with per-operand element strides (0 broadcasts).
struct StridedView {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t out_stride[kMaxDims] = {};  // contiguous strides of the output
  int64_t a_stride[kMaxDims] = {};
  int64_t b_stride[kMaxDims] = {};
  int64_t a_offset = 0;  // element offset of the first element read from a
};

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow };
enum class UnaryOp : int {
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kErf,
  kReciprocal,
  kIdentity,
  kGelu
};

/// out = op(a, b) for float32 (Add with alpha: a + b * alpha).
cudaError_t LaunchBinaryF32(BinaryOp op, const StridedView& view, int64_t count, const float* a,
                            const float* b, float* out, float alpha, cudaStream_t stream);
/// out = op(in) for float32, contiguous.
cudaError_t LaunchUnaryF32(UnaryOp op, int64_t count, const float* in, float* out,
                           cudaStream_t stream);
/// out = min(max(in, lo), hi) for float32, contiguous.
cudaError_t LaunchClampF32(int64_t count, const float* in, float* out, float lo, float hi,
                           cudaStream_t stream);
/// out[i] = a[view(a)] for elements of `element_size` bytes (1, 2, 4 or 8): transpose, slice,
/// expand and concat (out may be a sub-view of a larger tensor through out_stride).
cudaError_t LaunchStridedCopy(const StridedView& view, int64_t count, size_t element_size,
                              const void* a, void* out, cudaStream_t stream);
/// Cast between float32 / int64 / int32 / bool(uint8): type codes 0=f32 1=i64 2=i32 3=u8.
cudaError_t LaunchCast(int from, int to, int64_t count, const void* in, void* out,
                       cudaStream_t stream);
/// Softmax (log_softmax when `log`) over `axis_size` elements with stride `inner`, for every
/// (outer, inner) pair.
cudaError_t LaunchSoftmaxF32(int64_t outer, int64_t axis_size, int64_t inner, const float* in,
                             float* out, bool log, cudaStream_t stream);
/// Layer normalisation over the last `norm` elements of `rows` rows; scale / bias have `norm`
/// elements (bias may be null).
cudaError_t LaunchLayerNormF32(int64_t rows, int64_t norm, const float* in, const float* scale,
                               const float* bias, float epsilon, float* out, cudaStream_t stream);
/// Reduction of `reduce` elements with stride `inner` for every (outer, inner) pair:
/// kind 0 = sum, 1 = mean, 2 = max, 3 = min.
cudaError_t LaunchReduceF32(int kind, int64_t outer, int64_t reduce, int64_t inner, const float* in,
                            float* out, cudaStream_t stream);
/// Gather along an axis: out[o, i, n] = data[o, index[i], n] with `axis_size` rows; negative
/// indices count from the end; out-of-range indices write zero.
cudaError_t LaunchGather(int64_t outer, int64_t axis_size, int64_t num_indices, int64_t inner,
                         size_t element_size, const void* data, const int64_t* indices, void* out,
                         cudaStream_t stream);
/// y = x * scale[c] + bias[c] over [outer, channels, inner] (BatchNormalization folded).
cudaError_t LaunchChannelAffineF32(int64_t outer, int64_t channels, int64_t inner, const float* x,
                                   const float* scale, const float* bias, float* out,
                                   cudaStream_t stream);
/// 2-D pooling on NCHW float32: max (kind 0) or average (kind 1, count_include_pad as given).
struct Pool2d {
  int64_t n = 0, c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool count_include_pad = false;
};
cudaError_t LaunchPool2dF32(int kind, const Pool2d& p, const float* in, float* out,
                            cudaStream_t stream);
/// im2col for one image of a 2-D convolution (NCHW), for the GEMM-based Conv.
struct Conv2d {
  int64_t c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  int64_t dilation_h = 1, dilation_w = 1;
};
cudaError_t LaunchIm2ColF32(const Conv2d& p, int64_t channels_per_group, const float* image,
                            float* columns, cudaStream_t stream);
/// out[n, c, :] += bias[c] over [n, channels, inner].
cudaError_t LaunchAddChannelBiasF32(int64_t n, int64_t channels, int64_t inner, const float* bias,
                                    float* out, cudaStream_t stream);

}  // namespace reprise::kernels::cuda

#endif  // REPRISE_KERNELS_CUDA_LAUNCH_H_
