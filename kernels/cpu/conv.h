// The oneDNN convolution (conv.cc) that the fused convolution kernels build on (conv_dw.cc).
// Internal to the CPU kernels.
#ifndef REPRISE_KERNELS_CPU_CONV_H_
#define REPRISE_KERNELS_CPU_CONV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"

namespace reprise::kernels::cpu {

/// An activation applied by a fused convolution, with its parameters.
struct ConvActivation {
  std::string name;  // "" or a name of kFusedConvOp's "activation" (fused_ops.h)
  float clip_min = 0.0f;
  float clip_max = 0.0f;
  float alpha = 0.0f;  // LeakyRelu's alpha; HardSigmoid's alpha and beta
  float beta = 0.0f;
};

/// Reads an activation from a fused node's attributes `prefix`activation, `prefix`clip_min,
/// `prefix`clip_max, `prefix`activation_alpha, `prefix`activation_beta (prefix "" or "dw_").
absl::StatusOr<ConvActivation> ReadConvActivation(const runtime::Attributes& attrs,
                                                  const std::string& prefix);

/// The epilogue applied to the convolution's output: residual sum, then an activation.
struct ConvPostOps {
  bool residual = false;
  ConvActivation activation;
  Storage x = Storage::kPlain;
  Storage y = Storage::kPlain;
  Storage r = Storage::kPlain;
  // A depthwise 3x3 convolution (pads 1) applied to the result inside the same primitive
  // (oneDNN's depthwise post-op): the 1x1 convolution's output never leaves the cache.
  struct Depthwise {
    int64_t stride = 1;
    ConvActivation activation;
    const TensorDesc* weights = nullptr;  // [C, 1, 3, 3], known at plan time
    const TensorDesc* bias = nullptr;     // [C] known at plan time, or null
  };
  std::optional<Depthwise> depthwise;
};

/// A Conv with `post` fused, on oneDNN: inputs X, W, B and (with post.residual) R.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvWith(const PrepareContext& context,
                                                                const ConvPostOps& post);

/// kFusedConvDwOp (conv_dw.cc): a 1x1 convolution and a depthwise 3x3 one.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareFusedConvDw(const PrepareContext& context);

/// A KxK convolution run as a 1x1 one over its input gathered per tap ("taps as channels",
/// conv_taps.cc): channel t * C + c of the gathered input at output pixel p is input channel c at
/// the pixel tap t of p reads (zero in the padding). Where X lies in a blocked layout (nChw8c)
/// or channels-last, each copied run is one channel block or one pixel's channels.
struct TapGather {
  int64_t batch = 0, channel_runs = 0, run = 0;  // X's channels: channel_runs runs of `run`
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // leading pads
  // Strides in floats of X (batch, channel run, row, column) and of the gathered input (batch,
  // gathered channel run (t * channel_runs + run index), row, column).
  int64_t x_n = 0, x_c = 0, x_h = 0, x_w = 0;
  int64_t col_n = 0, col_c = 0, col_h = 0, col_w = 0;
};

/// The gather of a 2-D convolution over X of `x` [N, C, H, W] with `kernel`, `strides`,
/// `dilations` and `pads_begin` into an output of `out` [OH, OW], X stored in `tag` (nChw8c with
/// C a multiple of 8, or nhwc); nullopt for another layout.
std::optional<TapGather> MakeTapGather(const runtime::Shape& x, const runtime::Shape& out,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& strides,
                                       const std::vector<int64_t>& dilations,
                                       const std::vector<int64_t>& pads_begin,
                                       dnnl::memory::format_tag tag);

/// Writes the gathered input of `x` into `col` (g.batch x kernel taps x channel_runs x out_h x
/// out_w runs), on up to `threads` threads.
void GatherTaps(const TapGather& g, const float* x, float* col, int threads);

/// W [M, C, KH, KW] (row-major) as the 1x1 weights [M, KH * KW * C] of the gathered input.
std::vector<float> TapsAsChannelsWeights(const float* w, int64_t m, int64_t c, int64_t taps);

/// `bytes` rounded up to 64 (workspace offsets).
inline size_t ConvAlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CONV_H_
