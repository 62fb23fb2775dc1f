// The oneDNN convolution (conv.cc) that the fused convolution kernels build on (conv_dw.cc).
// Internal to the CPU kernels.
#ifndef REPRISE_KERNELS_CPU_CONV_H_
#define REPRISE_KERNELS_CPU_CONV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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
  // The residual is added after the activation (Y = act(conv) + R), not before.
  bool sum_after_activation = false;
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

/// A Conv with `post` fused, on oneDNN: inputs X, W, B and (with post.residual) R. Where oneDNN
/// would run its F(2x2, 3x3) Winograd kernel, the faster by timed runs of that and the direct
/// kernel (FasterOf, faster_way.h).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareConvWith(const PrepareContext& context,
                                                                const ConvPostOps& post);

/// A 3x3 convolution dilated by (DH, DW) (at least one above 1), one group, stride 1, pads D on
/// every side, weights known at plan time, no residual or depthwise post-op, whose phases
/// (ceil(H / DH) x ceil(W / DW), zeros past the input's edge) are at least 7x7, run as the
/// undilated convolution (pads 1) of a batch of N x DH x DW phase images (conv_phases.cc), where
/// that convolution runs Winograd; null otherwise (and for anything the convolution's checks
/// would refuse).
std::unique_ptr<PreparedKernel> MaybeDilatedAsPhases(const PrepareContext& context,
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

/// The output positions [first, end) along an axis of `out` positions whose input position
/// o * stride + offset lies in [0, in) (where a tap at offset reads inside X).
std::pair<int64_t, int64_t> InsideRange(int64_t in, int64_t out, int64_t offset, int64_t stride);

/// One tap (row-major index kh * KW + kw) of a 2-D convolution and the rectangle of output
/// pixels [oh0, oh1) x [ow0, ow1) for which it reads inside X; elsewhere it reads padding.
struct TapRegion {
  int64_t tap = 0, oh0 = 0, oh1 = 0, ow0 = 0, ow1 = 0;
  int64_t pixels() const { return (oh1 - oh0) * (ow1 - ow0); }
};

/// The taps of a 2-D convolution over an input of `in` [H, W] into `out` [OH, OW] with `kernel`,
/// `strides`, `dilations` and `pads_begin` that read inside the input for at least one output
/// pixel, in tap order, each with its rectangle.
std::vector<TapRegion> TapRegions(const runtime::Shape& in, const runtime::Shape& out,
                                  const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dilations,
                                  const std::vector<int64_t>& pads_begin);

/// A 2-D convolution (one group, weights known at plan time, no residual) computed per tap over
/// the tap's region only ("tap regions", conv_tap_regions.cc): Y = act(B + sum over taps t of
/// X shifted by t times W[:, :, t]), each product over the output pixels where tap t reads inside
/// X. For dilated convolutions wider than their input (DeepLabV3's atrous 3x3 convolutions at
/// rate 12 over 14x14, 24 over 28x28), whose taps mostly read padding that the direct kernels
/// multiply anyway.
struct TapRegionsConv {
  runtime::Shape x, y;  // [N, C, H, W] and [N, M, OH, OW]
  std::vector<int64_t> kernel, strides, dilations, pads_begin;
  std::vector<TapRegion> regions;                           // TapRegions of the geometry
  const float* weights = nullptr;                           // [M, C, KH, KW], a plan-time constant
  std::shared_ptr<const std::vector<float>> weights_owner;  // keeps `weights` alive if a copy
  bool has_bias = false;
  ConvActivation activation;
  Storage x_storage = Storage::kPlain, y_storage = Storage::kPlain;
  // A residual R of Y's shape (input 3, stored as r_storage) added before the activation.
  bool residual = false;
  Storage r_storage = Storage::kPlain;
  // One product per image over the whole window instead (its input gathered channels-last as
  // [OH x OW, taps x C], zeros in the padding): the same im2col and gemm as oneDNN's gemm
  // convolution, gathered in runs of KW x C floats where the taps of a row are adjacent.
  bool whole_window = false;
  // A 3x3 stride-1 convolution as Winograd's F(2x2, 3x3) instead: X in tiles of 4x4 pixels
  // (overlapping by 2) transformed to 16 rows of C each (B^T d B), one [tiles, C] x [C, M]
  // product per tile position with the weights transformed once (G g G^T, 16 x [C, M]), each
  // tile's 16 rows of M transformed back to its 2x2 outputs (A^T m A) and added into Y: 16
  // multiplications per 2x2 outputs and channel pair where the direct kernel does 36.
  bool winograd = false;
};

/// The kernel of `conv` (inputs X, W, B as the context's); the weights are rearranged once per
/// device into one [C, M] matrix per tap (the packed-weight cache).
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareTapRegionsConv(const PrepareContext& context,
                                                                      TapRegionsConv conv);

/// A depthwise 2-D convolution (one input and one output channel per group, weights known at
/// plan time) with X and Y in the chain's channel-blocked layout of `lanes` channels (16:
/// nChw16c, AVX-512; 8: nChw8c, AVX2), for our own kernel (conv_depthwise.cc).
struct OwnDepthwise {
  runtime::Shape x, y;  // [N, C, H, W] and [N, C, OH, OW]
  std::vector<int64_t> kernel, strides, dilations, pads_begin;
  const float* weights = nullptr;  // [C, group_channels, KH, KW]
  const float* bias = nullptr;     // [C], or null for none
  ConvActivation activation;
  int64_t lanes = 0;
  /// Input (and output) channels per group: 1 (depthwise), 2, 4 or 8 (fewer than `lanes`).
  int64_t group_channels = 1;
};

/// Our depthwise kernel for `dw`; null where it does not apply (another activation than those
/// it applies in registers, lanes other than 16 and 8, or groups of another width).
std::unique_ptr<PreparedKernel> MaybeOwnDepthwise(const PrepareContext& context,
                                                  const OwnDepthwise& dw);

struct ConvGeometry;

/// Our depthwise kernel (conv_depthwise.cc) in place of oneDNN's, where the device's options
/// allow it and the chain's layout has channel blocks: a depthwise convolution, or a 2-D one in
/// groups of 2, 4 or 8 input and output channels narrower than a block, with constant
/// weights and bias, no residual or fused depthwise; 2-D with X and Y in the blocked layout, or
/// 1-D with any ends (over [N, C, 1, L] in the blocked layout, which nCw16c / nCw8c are byte for
/// byte, X and Y reordered into and out of it in the workspace where stored otherwise). Null
/// otherwise.
std::unique_ptr<PreparedKernel> OwnDepthwiseFor(const PrepareContext& context,
                                                const ConvGeometry& g, const ConvPostOps& post);

/// `act` applied to y[0, n) in place, on up to `threads` threads (conv_activation.cc), then
/// add[0, n) added where `add` is not null.
void ApplyConvActivation(const ConvActivation& act, float* y, int64_t n, int threads,
                         const float* add = nullptr);

/// Appends `act` (fused_ops.h lists the names; "" is none) to `ops` as oneDNN eltwise post-ops;
/// false for another name (conv_activation.cc).
bool AppendActivation(const ConvActivation& act, dnnl::post_ops* ops);

/// `act` on one value (the broadcast-residual epilogue, which runs outside oneDNN).
float ApplyActivation(const ConvActivation& act, float v);

/// Activations that map 0 to 0 and that oneDNN 2.6's Winograd convolution takes no post-op for:
/// the convolution then runs Winograd without them and applies them after. Tanh too, which
/// every oneDNN 2.6 convolution takes slowly (SlowPostOp).
bool DeferrableActivation(const ConvActivation& act);

/// Activations made after the primitive rather than as its post-op (conv_activation.cc).
bool SlowPostOp(const ConvActivation& act);

/// `bytes` rounded up to 64 (workspace offsets).
inline size_t ConvAlignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CONV_H_
