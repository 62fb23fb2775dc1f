// Taps as channels (conv.h): the gather of a KxK convolution's input into the input of a 1x1
// convolution, and the matching weights. oneDNN's direct AVX2 convolution reads its whole
// weight block (C x KH x KW x 32 output channels) for every row of outputs, which no longer fits
// the L2 cache from C = 256 (3x3); its 1x1 convolution blocks the reduction and keeps it there.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "kernels/cpu/conv.h"

namespace reprise::kernels::cpu {

std::optional<TapGather> MakeTapGather(const runtime::Shape& x, const runtime::Shape& out,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& strides,
                                       const std::vector<int64_t>& dilations,
                                       const std::vector<int64_t>& pads_begin,
                                       dnnl::memory::format_tag tag) {
  if (x.size() != 4 || out.size() != 2 || kernel.size() != 2) return std::nullopt;
  TapGather g;
  g.batch = x[0];
  g.in_h = x[2];
  g.in_w = x[3];
  g.out_h = out[0];
  g.out_w = out[1];
  g.kernel_h = kernel[0];
  g.kernel_w = kernel[1];
  g.stride_h = strides[0];
  g.stride_w = strides[1];
  g.dilation_h = dilations[0];
  g.dilation_w = dilations[1];
  g.pad_h = pads_begin[0];
  g.pad_w = pads_begin[1];
  const int64_t c = x[1], taps = g.kernel_h * g.kernel_w;
  if (tag == dnnl::memory::format_tag::nChw8c && c % 8 == 0) {
    // X [N, C/8, H, W, 8]; gathered [N, taps * C/8, OH, OW, 8].
    g.run = 8;
    g.channel_runs = c / 8;
    g.x_w = 8;
    g.x_h = g.in_w * 8;
    g.x_c = g.in_h * g.x_h;
    g.x_n = g.channel_runs * g.x_c;
    g.col_w = 8;
    g.col_h = g.out_w * 8;
    g.col_c = g.out_h * g.col_h;
    g.col_n = taps * g.channel_runs * g.col_c;
    return g;
  }
  if (tag == dnnl::memory::format_tag::nhwc) {
    // X [N, H, W, C]; gathered [N, OH, OW, taps * C].
    g.run = c;
    g.channel_runs = 1;
    g.x_w = c;
    g.x_h = g.in_w * c;
    g.x_c = 0;
    g.x_n = g.in_h * g.x_h;
    g.col_c = c;
    g.col_w = taps * c;
    g.col_h = g.out_w * g.col_w;
    g.col_n = g.out_h * g.col_h;
    return g;
  }
  return std::nullopt;
}

std::pair<int64_t, int64_t> InsideRange(int64_t in, int64_t out, int64_t offset, int64_t stride) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t end = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  first = std::min(first, out);
  end = std::max(first, std::min(end, out));
  return {first, end};
}

void GatherTaps(const TapGather& g, const float* x, float* col, int threads) {
  const int64_t taps = g.kernel_h * g.kernel_w;
  const int64_t rows = g.batch * taps * g.channel_runs * g.out_h;
  const size_t run_bytes = static_cast<size_t>(g.run) * sizeof(float);
  // Item: one output row of one channel run of one tap.
  ParallelFor(
      rows, threads, static_cast<double>(g.out_w * g.run) * 0.25, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          int64_t rest = item;
          const int64_t oh = rest % g.out_h;
          rest /= g.out_h;
          const int64_t cr = rest % g.channel_runs;
          rest /= g.channel_runs;
          const int64_t t = rest % taps;
          const int64_t n = rest / taps;
          const int64_t kh = t / g.kernel_w, kw = t % g.kernel_w;
          float* out = col + n * g.col_n + (t * g.channel_runs + cr) * g.col_c + oh * g.col_h;
          const int64_t ih = oh * g.stride_h + kh * g.dilation_h - g.pad_h;
          if (ih < 0 || ih >= g.in_h) {
            for (int64_t ow = 0; ow < g.out_w; ++ow) std::memset(out + ow * g.col_w, 0, run_bytes);
            continue;
          }
          const float* in = x + n * g.x_n + cr * g.x_c + ih * g.x_h;
          // Output columns whose tap lies inside the row: [lo, hi).
          const int64_t off = kw * g.dilation_w - g.pad_w;
          const auto [lo, hi] = InsideRange(g.in_w, g.out_w, off, g.stride_w);
          for (int64_t ow = 0; ow < lo; ++ow) std::memset(out + ow * g.col_w, 0, run_bytes);
          if (g.stride_w == 1 && g.col_w == g.run && g.x_w == g.run) {
            std::memcpy(out + lo * g.col_w, in + (lo + off) * g.x_w,
                        static_cast<size_t>(hi - lo) * run_bytes);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) {
              std::memcpy(out + ow * g.col_w, in + (ow * g.stride_w + off) * g.x_w, run_bytes);
            }
          }
          for (int64_t ow = hi; ow < g.out_w; ++ow) std::memset(out + ow * g.col_w, 0, run_bytes);
        }
      });
}

std::vector<float> TapsAsChannelsWeights(const float* w, int64_t m, int64_t c, int64_t taps) {
  std::vector<float> out(static_cast<size_t>(m * taps * c));
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t t = 0; t < taps; ++t) out[(o * taps + t) * c + ch] = w[(o * c + ch) * taps + t];
    }
  }
  return out;
}

}  // namespace reprise::kernels::cpu
