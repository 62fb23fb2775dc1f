#include "kernels/cpu/conv_geometry.h"

#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

// Drops the leading and trailing taps of each spatial axis that read only padding for every
// output position (a dilated convolution wider than its input: DeepLabV3's atrous 3x3
// convolutions at dilation 24 and 36 over a 14x14 map, and at 36 over 28x28, are 1x1
// convolutions with the centre weights), moving the pads so that the output stays the same. Exact:
// the dropped taps multiply zeros. The trimmed weights are a copy, which the kernel keeps.
void TrimPaddingTaps(ConvGeometry* g) {
  const size_t rank = g->win.kernel.size();
  std::vector<int64_t> first(rank), count(rank);
  bool trims = false;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t in = g->x[i + 2], k = g->win.kernel[i], d = g->win.dilations[i];
    const int64_t reach = (g->win.output[i] - 1) * g->win.strides[i];  // last output's offset
    const int64_t pb = g->win.pads_begin[i], pe = g->win.pads_end[i];
    int64_t lo = 0, hi = k - 1;
    while (lo <= hi && reach + lo * d - pb < 0) ++lo;  // tap lo reads before the input
    while (hi >= lo && hi * d - pb >= in) --hi;        // tap hi reads after it
    first[i] = lo;
    count[i] = hi - lo + 1;
    // All taps dead (the output is the bias), or the pads would turn negative: keep them all.
    if (count[i] <= 0 || pb - lo * d < 0 || pe - (k - 1 - hi) * d < 0) {
      first[i] = 0;
      count[i] = k;
    }
    trims = trims || count[i] < k;
  }
  if (!trims) return;
  // W [M, C/group, k...] -> [M, C/group, count...], taps first[i] .. first[i] + count[i] - 1.
  const int64_t outer = g->w[0] * g->w[1];
  int64_t old_taps = 1, new_taps = 1;
  for (size_t i = 0; i < rank; ++i) {
    old_taps *= g->win.kernel[i];
    new_taps *= count[i];
  }
  auto trimmed = std::make_shared<std::vector<float>>(static_cast<size_t>(outer * new_taps));
  const float* w = static_cast<const float*>(g->weights);
  std::vector<int64_t> at(rank, 0);  // the new tap's index along each axis
  for (int64_t t = 0; t < new_taps; ++t) {
    int64_t source = 0;
    for (size_t i = 0; i < rank; ++i) source = source * g->win.kernel[i] + first[i] + at[i];
    for (int64_t o = 0; o < outer; ++o) {
      (*trimmed)[o * new_taps + t] = w[o * old_taps + source];
    }
    for (size_t i = rank; i-- > 0;) {
      if (++at[i] < count[i]) break;
      at[i] = 0;
    }
  }
  for (size_t i = 0; i < rank; ++i) {
    const int64_t k = g->win.kernel[i], d = g->win.dilations[i];
    g->win.pads_begin[i] -= first[i] * d;
    g->win.pads_end[i] -= (k - first[i] - count[i]) * d;
    g->win.kernel[i] = count[i];
    g->w[i + 2] = count[i];
  }
  g->weights = trimmed->data();
  g->trimmed = std::move(trimmed);
}

// Groups narrower than a channel block (ResNeXt-50's 32 groups of 4 channels) have no direct
// kernel in oneDNN 2.6 (it runs them as im2col and one small gemm per group: ResNeXt's 128-channel
// 3x3 over 56x56 took 5.2-5.7 ms, 1.7-1.9 ms in ONNX Runtime; merged, 1.4-1.6 ms on oneDNN's
// jit:avx2, and the model at batch 1 on one thread 132-135 -> 116 ms). Merging f adjacent groups
// into one of f x C/group input and f x M/group output channels, its weights block-diagonal (zeros
// between the merged groups), gives each group whole channel blocks of `block` (ChainTag's 8 or 16)
// for f times the multiply-adds on the direct kernel. Only with weights known at plan time, where
// oneDNN's choice for the groups as they are is its gemm or reference code and its choice for the
// merged ones is not, and where f is kMaxGroupMerge or less; depthwise convolutions (one channel
// per group) have their own kernels. False (g unchanged) where no merge applies.
constexpr int64_t kMaxGroupMerge = 2;

bool OnGemmOrReference(const dnnl::convolution_forward::primitive_desc& pd) {
  const std::string impl = pd.impl_info_str();
  return absl::StrContains(impl, "gemm") || absl::StartsWith(impl, "ref");
}

bool MergeNarrowGroups(ConvGeometry* g, int64_t block) {
  const int64_t groups = g->group, cg = g->w[1], mg = g->w[0] / g->group;
  if (!g->known_weights || g->x.size() != 4 || groups <= 1 || cg == 1 || block <= 1 ||
      (cg % block == 0 && mg % block == 0)) {
    return false;
  }
  const int64_t fc = block / std::gcd(cg, block), fm = block / std::gcd(mg, block);
  const int64_t f = std::lcm(fc, fm);
  if (f > kMaxGroupMerge || groups % f != 0) return false;
  int64_t taps = 1;
  for (size_t i = 2; i < g->w.size(); ++i) taps *= g->w[i];
  const int64_t m = g->w[0], merged_c = f * cg;
  auto merged =
      std::make_shared<std::vector<float>>(static_cast<size_t>(m * merged_c * taps), 0.0f);
  const float* w = static_cast<const float*>(g->weights);
  for (int64_t o = 0; o < m; ++o) {
    const int64_t at = (o / mg) % f;  // the original group's place in the merged one
    for (int64_t c = 0; c < cg; ++c) {
      std::memcpy(merged->data() + (o * merged_c + at * cg + c) * taps, w + (o * cg + c) * taps,
                  static_cast<size_t>(taps) * sizeof(float));
    }
  }
  g->group = groups / f;
  g->w[1] = merged_c;
  g->w_dims = {g->group, m / g->group, merged_c};
  g->w_dims.insert(g->w_dims.end(), g->w.begin() + 2, g->w.end());
  g->weights = merged->data();
  g->trimmed = std::move(merged);
  return true;
}

// Step 1: the inputs, the window and the output shapes (with a depthwise post-op, Y is the
// depthwise convolution's output).
absl::StatusOr<ConvGeometry> CheckConvGeometry(const PrepareContext& context,
                                               const ConvPostOps& post) {
  ConvGeometry g;
  ASSIGN_OR_RETURN(g.group, CheckConvInputs(context, /*transposed=*/false, post.residual ? 4 : 3));
  g.x = context.inputs[0].shape;
  g.w = context.inputs[1].shape;
  const std::vector<int64_t> spatial(g.x.begin() + 2, g.x.end());
  ASSIGN_OR_RETURN(g.win,
                   ForwardWindow(context, spatial, std::vector<int64_t>(g.w.begin() + 2, g.w.end()),
                                 /*ceil_mode=*/false));
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (g.win.kernel[i] != g.w[i + 2]) {
      return InvalidArgument(context, "kernel_shape ", runtime::ShapeToString(g.win.kernel),
                             " does not match weights ", runtime::ShapeToString(g.w));
    }
  }
  g.y = {g.x[0], g.w[0]};
  g.y.insert(g.y.end(), g.win.output.begin(), g.win.output.end());
  g.y_out = g.y;
  if (post.depthwise.has_value()) {
    if (g.x.size() != 4 || post.residual) {
      return InvalidArgument(context,
                             "a depthwise post-op needs a 2-D convolution and no residual");
    }
    for (size_t i = 2; i < 4; ++i) g.y_out[i] = (g.y[i] - 1) / post.depthwise->stride + 1;
  }
  g.has_bias = HasInput(context, 2);
  g.known_weights = context.inputs[1].data != nullptr;
  g.weights = context.inputs[1].data;
  if (g.known_weights && !post.depthwise.has_value() && !g.empty()) TrimPaddingTaps(&g);
  g.w_dims = g.w;
  if (g.group > 1) {
    g.w_dims[0] = g.w[0] / g.group;
    g.w_dims.insert(g.w_dims.begin(), g.group);
  }
  return g;
}

}  // namespace reprise::kernels::cpu
