// Depthwise 2-D convolutions (one input and one output channel per group) on the channel-blocked
// layout of a convolution chain (nChw16c with AVX-512, nChw8c with AVX2), our own kernel: each
// output vector (one pixel of a channel block) sums its KH x KW taps in a register from the
// bias, several pixels of a row at a time with each input column loaded once for all of them and
// the row's weights in registers, and the activation is applied in the register before the one
// store. 1-D depthwise convolutions run on it as [N, C, 1, L] (OwnDepthwise1dFor).
//
// Narrow groups (2, 4 or 8 input and output channels per group, fewer than a block: ResNeXt's
// 32x4d, RegNetY's width 8) run on the same loops: a group's channels lie within one block, so
// for each of its input channels ci the loaded input vector is permuted so that every lane holds
// input channel ci of its own group (GroupChannel), then multiplied by that channel's weights.
// oneDNN 2.6 runs them only on blocks of the group's width (4 or 8 channels), reordered into
// and out of that layout at every step (ResNeXt-50's 128 -> 128 3x3 over 56x56 in groups of 4,
// one thread: 0.64 ms plus 0.29 ms of reorders).
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {
namespace {

enum class DwActivation {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kSwish,
  kTanh
};

// The activations the kernel applies in registers; nullopt for the others (Gelu).
std::optional<DwActivation> DwActivationOf(const ConvActivation& act) {
  const std::string& n = act.name;
  if (n.empty()) return DwActivation::kNone;
  if (n == "Relu") return DwActivation::kRelu;
  if (n == "LeakyRelu") return DwActivation::kLeakyRelu;
  if (n == "Clip") return DwActivation::kClip;
  if (n == "Sigmoid") return DwActivation::kSigmoid;
  if (n == "HardSigmoid") return DwActivation::kHardSigmoid;
  if (n == "HardSwish") return DwActivation::kHardSwish;
  if (n == "Swish") return DwActivation::kSwish;
  if (n == "Tanh") return DwActivation::kTanh;
  return std::nullopt;
}

// The geometry of one depthwise convolution over blocked X [N, CB, H, W, lanes] into blocked
// Y [N, CB, OH, OW, lanes], with its activation's kind and parameters.
struct DwShape {
  int64_t n = 0, blocks = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t channels = 0;  // C: the last block holds C - (CB - 1) x lanes of them
  DwActivation act = DwActivation::kNone;
  float p0 = 0.0f, p1 = 0.0f;  // Clip's min and max; LeakyRelu's alpha; HardSigmoid's alpha, beta
  // Output columns [ow_lo, ow_hi) read inside X for every tap of the row.
  int64_t ow_lo = 0, ow_hi = 0;
};

// The activation applied to one output vector (its sum, from the bias); lanes past C zeroed where
// `keep` (ones for real channels, zeros past C) is given.
template <typename V>
__attribute__((always_inline)) inline void Finish(const DwShape& s, V* out, const V* keep) {
  using I = IntsFor<V>;
  V v = *out;
  const V zero{};
  switch (s.act) {
    case DwActivation::kNone:
      break;
    case DwActivation::kRelu:
      v = v > 0.0f ? v : zero;
      break;
    case DwActivation::kLeakyRelu:
      v = v >= 0.0f ? v : v * s.p0;
      break;
    case DwActivation::kClip:
      v = v < s.p0 ? zero + s.p0 : v;
      v = v > s.p1 ? zero + s.p1 : v;
      break;
    case DwActivation::kHardSigmoid: {
      V t = v * s.p0 + s.p1;
      t = t < 0.0f ? zero : t;
      v = t > 1.0f ? zero + 1.0f : t;
      break;
    }
    case DwActivation::kHardSwish: {
      V t = v * (1.0f / 6.0f) + 0.5f;
      t = t < 0.0f ? zero : t;
      t = t > 1.0f ? zero + 1.0f : t;
      v = v * t;
      break;
    }
    case DwActivation::kSigmoid:
    case DwActivation::kSwish: {
      // 1 / (1 + e^-x) through e^-|x|, as SigmoidArray.
      V e;
      ExpNonPositive<V, I>(v < 0.0f ? v : -v, &e);
      const V sigmoid = (v >= 0.0f ? zero + 1.0f : e) / (e + 1.0f);
      v = s.act == DwActivation::kSwish ? v * sigmoid : sigmoid;
      break;
    }
    case DwActivation::kTanh:
      TanhOf(v, &v);
      break;
  }
  if (keep != nullptr) v *= *keep;
  *out = v;
}

// Lane l of *out takes lane l - l % kCg + kCi of `v`: input channel kCi of the group of
// kCg channels that lane l's output channel belongs to (kCg divides the block, so the group lies
// within it). kCg 1 (depthwise): `v` itself.
// (__builtin_shufflevector: constant lanes, which GCC 12 and clang both take.)
template <int kCg, int kCi, typename V>
__attribute__((always_inline)) inline void GroupChannel(const V& v, V* out) {
#define REPRISE_GC_LANE(l) ((l) - (l) % kCg + kCi)
  if constexpr (kCg == 1 || kCi >= kCg) {
    *out = v;
  } else if constexpr (sizeof(V) == 64) {
    *out = __builtin_shufflevector(
        v, v, REPRISE_GC_LANE(0), REPRISE_GC_LANE(1), REPRISE_GC_LANE(2), REPRISE_GC_LANE(3),
        REPRISE_GC_LANE(4), REPRISE_GC_LANE(5), REPRISE_GC_LANE(6), REPRISE_GC_LANE(7),
        REPRISE_GC_LANE(8), REPRISE_GC_LANE(9), REPRISE_GC_LANE(10), REPRISE_GC_LANE(11),
        REPRISE_GC_LANE(12), REPRISE_GC_LANE(13), REPRISE_GC_LANE(14), REPRISE_GC_LANE(15));
  } else {
    static_assert(sizeof(V) == 32);
    *out = __builtin_shufflevector(v, v, REPRISE_GC_LANE(0), REPRISE_GC_LANE(1), REPRISE_GC_LANE(2),
                                   REPRISE_GC_LANE(3), REPRISE_GC_LANE(4), REPRISE_GC_LANE(5),
                                   REPRISE_GC_LANE(6), REPRISE_GC_LANE(7));
  }
#undef REPRISE_GC_LANE
}

// GroupChannel for a run-time ci (0 <= ci < kCg); loops over ci unrolled fold the switch.
template <int kCg, typename V>
__attribute__((always_inline)) inline void GroupChannel(const V& v, int ci, V* out) {
  switch (ci) {
    case 1:
      return GroupChannel<kCg, 1>(v, out);
    case 2:
      return GroupChannel<kCg, 2>(v, out);
    case 3:
      return GroupChannel<kCg, 3>(v, out);
    case 4:
      return GroupChannel<kCg, 4>(v, out);
    case 5:
      return GroupChannel<kCg, 5>(v, out);
    case 6:
      return GroupChannel<kCg, 6>(v, out);
    case 7:
      return GroupChannel<kCg, 7>(v, out);
    default:
      return GroupChannel<kCg, 0>(v, out);
  }
}

// Output column `ox` of row `oy` (input rows from iy0, taps' rows [ky0, ky1) inside X), checking
// each tap's column: any window (the generic kernel's edge columns). The weights are
// [KH x KW, kCg, lanes].
template <typename V, int kCg>
__attribute__((always_inline)) inline void DwPixelChecked(const DwShape& s, const float* x,
                                                          const float* w, const V& b, float* y,
                                                          int64_t iy0, int64_t ky0, int64_t ky1,
                                                          int64_t ox, const V* keep) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V acc = b;
  const int64_t ix0 = ox * s.sw - s.pw;
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* row = x + (iy0 + ky * s.dh) * s.w * kLanes;
    for (int64_t kx = 0; kx < s.kw; ++kx) {
      const int64_t ix = ix0 + kx * s.dw;
      if (ix < 0 || ix >= s.w) continue;
      V xv;
      LoadFloats(row + ix * kLanes, &xv);
#pragma GCC unroll 8
      for (int ci = 0; ci < kCg; ++ci) {
        V wv, xc;
        LoadFloats(w + ((ky * s.kw + kx) * kCg + ci) * kLanes, &wv);
        GroupChannel<kCg>(xv, ci, &xc);
        acc += xc * wv;
      }
    }
  }
  Finish(s, &acc, keep);
  StoreFloats(y + ox * kLanes, acc);
}

// The first and one-past-last tap rows of output row `oy` that read inside X.
inline void TapRows(const DwShape& s, int64_t oy, int64_t* iy0, int64_t* ky0, int64_t* ky1) {
  *iy0 = oy * s.sh - s.ph;
  *ky0 = 0;
  *ky1 = s.kh;
  while (*ky0 < *ky1 && *iy0 + *ky0 * s.dh < 0) ++*ky0;
  while (*ky1 > *ky0 && *iy0 + (*ky1 - 1) * s.dh >= s.h) --*ky1;
}

// Any window: one output row `oy` of one channel block (x the block's input plane [H, W, lanes],
// w its weights [KH x KW, lanes], bias its [lanes], y the row [OW, lanes]). Columns inside
// [ow_lo, ow_hi) go kPixels at a time without bounds checks, each tap's weights loaded once for
// them; the others check each tap.
template <typename V, int kPixels, int kCg>
__attribute__((always_inline)) inline void DwRowGeneric(const DwShape& s, const float* x,
                                                        const float* w, const float* bias, float* y,
                                                        int64_t oy, const V* keep) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t iy0, ky0, ky1;
  TapRows(s, oy, &iy0, &ky0, &ky1);
  V b;
  LoadFloats(bias, &b);
  const int64_t lo = std::min(s.ow_lo, s.ow), hi = std::max(lo, s.ow_hi);
  for (int64_t ox = 0; ox < lo; ++ox) {
    DwPixelChecked<V, kCg>(s, x, w, b, y, iy0, ky0, ky1, ox, keep);
  }
  int64_t ox = lo;
  const int64_t step = s.sw * kLanes;
  for (; ox + kPixels <= hi; ox += kPixels) {
    V acc[kPixels];
#pragma GCC unroll 16
    for (int p = 0; p < kPixels; ++p) acc[p] = b;
    const float* first = x + (ox * s.sw - s.pw) * kLanes;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* row = first + (iy0 + ky * s.dh) * s.w * kLanes;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const float* at = row + kx * s.dw * kLanes;
#pragma GCC unroll 8
        for (int ci = 0; ci < kCg; ++ci) {
          V wv;
          LoadFloats(w + ((ky * s.kw + kx) * kCg + ci) * kLanes, &wv);
#pragma GCC unroll 16
          for (int p = 0; p < kPixels; ++p) {
            V xv, xc;
            LoadFloats(at + p * step, &xv);
            GroupChannel<kCg>(xv, ci, &xc);
            acc[p] += xc * wv;
          }
        }
      }
    }
#pragma GCC unroll 16
    for (int p = 0; p < kPixels; ++p) {
      Finish(s, &acc[p], keep);
      StoreFloats(y + (ox + p) * kLanes, acc[p]);
    }
  }
  for (; ox < s.ow; ++ox) DwPixelChecked<V, kCg>(s, x, w, b, y, iy0, ky0, ky1, ox, keep);
}

// The activation applied to a block's kPixels sums, which are then stored from output `ox` of
// the row (only the first `count` where kChecked).
template <typename V, int kPixels, bool kChecked>
__attribute__((always_inline)) inline void FinishBlock(const DwShape& s, V* acc, float* y,
                                                       int64_t ox, int64_t count, const V* keep) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
#pragma GCC unroll 16
  for (int p = 0; p < kPixels; ++p) {
    if (kChecked && p >= count) break;
    Finish(s, &acc[p], keep);
    StoreFloats(y + (ox + p) * kLanes, acc[p]);
  }
}

// A window of kKw columns at column stride kStride, no column dilation: kPixels adjacent outputs
// `ox`.. of a row at a time, each input column of the row loaded once for all the outputs that
// read it and the row's kKw weights held in registers (a stride-1 3x3 block of 12 outputs: 14
// loads of X for 36 multiply-adds per tap row, where one load per multiply-add would be 36). With
// kChecked, the columns outside X are skipped and only the first `count` outputs stored (the
// edges of the row and its last block).
template <typename V, int kKw, int kStride, int kPixels, bool kChecked>
__attribute__((always_inline)) inline void DwBlockFixed(const DwShape& s, const float* x,
                                                        const float* w, const V& b, float* y,
                                                        int64_t iy0, int64_t ky0, int64_t ky1,
                                                        int64_t ox, int64_t count, const V* keep) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr int kColumns = (kPixels - 1) * kStride + kKw;
  V acc[kPixels];
#pragma GCC unroll 16
  for (int p = 0; p < kPixels; ++p) acc[p] = b;
  const int64_t ix0 = ox * kStride - s.pw;
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* row = x + ((iy0 + ky * s.dh) * s.w + ix0) * kLanes;
    V wv[kKw];
#pragma GCC unroll 8
    for (int kx = 0; kx < kKw; ++kx) LoadFloats(w + (ky * kKw + kx) * kLanes, &wv[kx]);
#pragma GCC unroll 64
    for (int j = 0; j < kColumns; ++j) {
      if (kChecked && (ix0 + j < 0 || ix0 + j >= s.w)) continue;
      V xv;
      LoadFloats(row + j * kLanes, &xv);
#pragma GCC unroll 8
      for (int kx = 0; kx < kKw; ++kx) {
        const int d = j - kx;  // = p * kStride for the output p that reads column j at tap kx
        if (d >= 0 && d % kStride == 0 && d / kStride < kPixels) acc[d / kStride] += xv * wv[kx];
      }
    }
  }
  FinishBlock<V, kPixels, kChecked>(s, acc, y, ox, count, keep);
}

// Outputs per block of DwBlockFixed: within the registers (32 with AVX-512, 16 with AVX2) with
// the kKw weights and the loaded column.
template <typename V, int kKw>
constexpr int kFixedPixels = sizeof(V) == 64 ? (kKw <= 3 ? 12 : 8) : (kKw <= 3 ? 6 : 4);

// DwBlockFixed for groups of kCg > 1 channels: per input channel ci of the groups, the block's
// kColumns input columns permuted once into registers (GroupChannel's lanes), then each tap's
// weights loaded once for the kPixels outputs (a stride-1 3x3 block of 12 in groups of 8: per
// tap row 112 permutes and 24 weight loads for 288 multiply-adds). Columns outside X count as
// zeros where kChecked.
template <typename V, int kKw, int kStride, int kPixels, bool kChecked, int kCg>
__attribute__((always_inline)) inline void GcBlockFixed(const DwShape& s, const float* x,
                                                        const float* w, const V& b, float* y,
                                                        int64_t iy0, int64_t ky0, int64_t ky1,
                                                        int64_t ox, int64_t count, const V* keep) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr int kColumns = (kPixels - 1) * kStride + kKw;
  V acc[kPixels];
#pragma GCC unroll 16
  for (int p = 0; p < kPixels; ++p) acc[p] = b;
  const int64_t ix0 = ox * kStride - s.pw;
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* row = x + ((iy0 + ky * s.dh) * s.w + ix0) * kLanes;
    const float* wrow = w + ky * kKw * kCg * kLanes;
#pragma GCC unroll 8
    for (int ci = 0; ci < kCg; ++ci) {
      V xc[kColumns];
#pragma GCC unroll 64
      for (int j = 0; j < kColumns; ++j) {
        if (kChecked && (ix0 + j < 0 || ix0 + j >= s.w)) {
          xc[j] = V{};
          continue;
        }
        V xv;
        LoadFloats(row + j * kLanes, &xv);
        GroupChannel<kCg>(xv, ci, &xc[j]);
      }
#pragma GCC unroll 8
      for (int kx = 0; kx < kKw; ++kx) {
        V wv;
        LoadFloats(wrow + (kx * kCg + ci) * kLanes, &wv);
#pragma GCC unroll 16
        for (int p = 0; p < kPixels; ++p) acc[p] += xc[p * kStride + kx] * wv;
      }
    }
  }
  FinishBlock<V, kPixels, kChecked>(s, acc, y, ox, count, keep);
}

// Outputs per block of GcBlockFixed: its permuted columns and the outputs within the registers;
// blocks that reach past X or the row's end take kGroupEdgePixels at a time (a checked block
// multiplies its columns past X as zeros: 14x14 maps left most of a second block of 12 empty).
template <typename V, int kStride>
constexpr int kGroupPixels = sizeof(V) == 64 ? (kStride == 1 ? 12 : 8) : (kStride == 1 ? 6 : 4);
template <typename V>
constexpr int kGroupEdgePixels = sizeof(V) == 64 ? 4 : 2;

// One output row by DwBlockFixed (GcBlockFixed for groups of kCg > 1): blocks wholly inside X
// unchecked, the others checked.
template <typename V, int kKw, int kStride, int kCg>
__attribute__((always_inline)) inline void DwRowFixed(const DwShape& s, const float* x,
                                                      const float* w, const float* bias, float* y,
                                                      int64_t oy, const V* keep) {
  constexpr int kPixels = kCg == 1 ? kFixedPixels<V, kKw> : kGroupPixels<V, kStride>;
  int64_t iy0, ky0, ky1;
  TapRows(s, oy, &iy0, &ky0, &ky1);
  V b;
  LoadFloats(bias, &b);
  // Whether the `pixels` outputs from ox are all in the row and read only inside X.
  const auto inside = [&s](int64_t ox, int64_t pixels) {
    const int64_t ix0 = ox * kStride - s.pw;
    return ox + pixels <= s.ow && ix0 >= 0 && ix0 + (pixels - 1) * kStride + kKw <= s.w;
  };
  if constexpr (kCg == 1) {
    for (int64_t ox = 0; ox < s.ow; ox += kPixels) {
      const int64_t count = std::min<int64_t>(kPixels, s.ow - ox);
      if (inside(ox, kPixels)) {
        DwBlockFixed<V, kKw, kStride, kPixels, false>(s, x, w, b, y, iy0, ky0, ky1, ox, count,
                                                      keep);
      } else {
        DwBlockFixed<V, kKw, kStride, kPixels, true>(s, x, w, b, y, iy0, ky0, ky1, ox, count, keep);
      }
    }
  } else {
    constexpr int kEdge = kGroupEdgePixels<V>;
    for (int64_t ox = 0; ox < s.ow;) {
      if (inside(ox, kPixels)) {
        GcBlockFixed<V, kKw, kStride, kPixels, false, kCg>(s, x, w, b, y, iy0, ky0, ky1, ox,
                                                           kPixels, keep);
        ox += kPixels;
        continue;
      }
      const int64_t count = std::min<int64_t>(kEdge, s.ow - ox);
      if (inside(ox, kEdge)) {
        GcBlockFixed<V, kKw, kStride, kEdge, false, kCg>(s, x, w, b, y, iy0, ky0, ky1, ox, count,
                                                         keep);
      } else {
        GcBlockFixed<V, kKw, kStride, kEdge, true, kCg>(s, x, w, b, y, iy0, ky0, ky1, ox, count,
                                                        keep);
      }
      ox += kEdge;
    }
  }
}

template <int kCg>
struct GenericRow {
  static constexpr int kGroupChannels = kCg;
  template <typename V>
  __attribute__((always_inline)) static void Run(const DwShape& s, const float* x, const float* w,
                                                 const float* bias, float* y, int64_t oy,
                                                 const V* keep) {
    DwRowGeneric<V, sizeof(V) == 64 ? 8 : 4, kCg>(s, x, w, bias, y, oy, keep);
  }
};

template <int kKw, int kStride, int kCg>
struct FixedRow {
  static constexpr int kGroupChannels = kCg;
  template <typename V>
  __attribute__((always_inline)) static void Run(const DwShape& s, const float* x, const float* w,
                                                 const float* bias, float* y, int64_t oy,
                                                 const V* keep) {
    DwRowFixed<V, kKw, kStride, kCg>(s, x, w, bias, y, oy, keep);
  }
};

// Rows [begin, end) of the N x CB x OH output rows, each by Row.
template <typename V, typename Row>
__attribute__((always_inline)) inline void DwRows(const DwShape& s, const float* x, const float* w,
                                                  const float* bias, float* y, int64_t begin,
                                                  int64_t end) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  const int64_t real = s.channels - (s.blocks - 1) * kLanes;  // channels of the last block
  V keep{};
  for (int64_t i = 0; i < real; ++i) keep[i] = 1.0f;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / s.oh, oy = r % s.oh, block = plane % s.blocks;
    Row::template Run<V>(s, x + plane * s.h * s.w * kLanes,
                         w + block * s.kh * s.kw * Row::kGroupChannels * kLanes,
                         bias + block * kLanes, y + (plane * s.oh + oy) * s.ow * kLanes, oy,
                         block == s.blocks - 1 && real < kLanes ? &keep : nullptr);
  }
}

using DwRowsFn = void (*)(const DwShape&, const float*, const float*, const float*, float*, int64_t,
                          int64_t);

#define REPRISE_DW_ARGS                                                                         \
  const DwShape &s, const float *x, const float *w, const float *bias, float *y, int64_t begin, \
      int64_t end
#define REPRISE_DW_COPIES(name, ...)                                      \
  __attribute__((target("avx512f"))) void name##Avx512(REPRISE_DW_ARGS) { \
    DwRows<Floats16, __VA_ARGS__>(s, x, w, bias, y, begin, end);          \
  }                                                                       \
  __attribute__((target("avx2,fma"))) void name##Avx2(REPRISE_DW_ARGS) {  \
    DwRows<Floats8, __VA_ARGS__>(s, x, w, bias, y, begin, end);           \
  }
REPRISE_DW_COPIES(DwGeneric, GenericRow<1>)
REPRISE_DW_COPIES(Dw3Stride1, FixedRow<3, 1, 1>)
REPRISE_DW_COPIES(Dw3Stride2, FixedRow<3, 2, 1>)
REPRISE_DW_COPIES(Dw5Stride1, FixedRow<5, 1, 1>)
REPRISE_DW_COPIES(Dw5Stride2, FixedRow<5, 2, 1>)
REPRISE_DW_COPIES(Dw7Stride1, FixedRow<7, 1, 1>)
REPRISE_DW_COPIES(Dw7Stride2, FixedRow<7, 2, 1>)
// Narrow groups: any window, and the 3x3 ones of ResNeXt and RegNet.
REPRISE_DW_COPIES(Gc2Generic, GenericRow<2>)
REPRISE_DW_COPIES(Gc2Stride1, FixedRow<3, 1, 2>)
REPRISE_DW_COPIES(Gc2Stride2, FixedRow<3, 2, 2>)
REPRISE_DW_COPIES(Gc4Generic, GenericRow<4>)
REPRISE_DW_COPIES(Gc4Stride1, FixedRow<3, 1, 4>)
REPRISE_DW_COPIES(Gc4Stride2, FixedRow<3, 2, 4>)
REPRISE_DW_COPIES(Gc8Generic, GenericRow<8>)
REPRISE_DW_COPIES(Gc8Stride1, FixedRow<3, 1, 8>)
REPRISE_DW_COPIES(Gc8Stride2, FixedRow<3, 2, 8>)
#undef REPRISE_DW_COPIES
#undef REPRISE_DW_ARGS

// The rows function of a group of `cg` (2, 4 or 8) channels for `s` on `lanes`.
DwRowsFn PickGroupRows(const DwShape& s, int64_t lanes, int64_t cg) {
  const bool wide = lanes == 16;
  const bool fixed = s.kw == 3 && s.dw == 1 && (s.sw == 1 || s.sw == 2);
  const bool one = s.sw == 1;
#define REPRISE_GC_PICK(name)                                  \
  (!fixed ? (wide ? &name##GenericAvx512 : &name##GenericAvx2) \
   : one  ? (wide ? &name##Stride1Avx512 : &name##Stride1Avx2) \
          : (wide ? &name##Stride2Avx512 : &name##Stride2Avx2))
  if (cg == 2) return REPRISE_GC_PICK(Gc2);
  if (cg == 4) return REPRISE_GC_PICK(Gc4);
  return REPRISE_GC_PICK(Gc8);
#undef REPRISE_GC_PICK
}

// The rows function for `s` in groups of `cg` channels on `lanes` (16: AVX-512, 8: AVX2).
DwRowsFn PickRows(const DwShape& s, int64_t lanes, int64_t cg) {
  if (cg > 1) return PickGroupRows(s, lanes, cg);
  const bool wide = lanes == 16;
  DwRowsFn fn = wide ? &DwGenericAvx512 : &DwGenericAvx2;
  if (s.dw != 1 || s.sw < 1 || s.sw > 2) return fn;
  const bool one = s.sw == 1;
  if (s.kw == 3)
    fn = wide ? (one ? &Dw3Stride1Avx512 : &Dw3Stride2Avx512)
              : (one ? &Dw3Stride1Avx2 : &Dw3Stride2Avx2);
  if (s.kw == 5)
    fn = wide ? (one ? &Dw5Stride1Avx512 : &Dw5Stride2Avx512)
              : (one ? &Dw5Stride1Avx2 : &Dw5Stride2Avx2);
  if (s.kw == 7)
    fn = wide ? (one ? &Dw7Stride1Avx512 : &Dw7Stride2Avx512)
              : (one ? &Dw7Stride1Avx2 : &Dw7Stride2Avx2);
  return fn;
}

class DepthwiseKernel final : public PreparedKernel {
 public:
  DepthwiseKernel(std::string op, std::vector<TensorDesc> outputs, DwShape shape, int64_t lanes,
                  int64_t group_channels, std::vector<float> weights, std::vector<float> bias,
                  int threads)
      : op_(std::move(op)),
        outputs_(std::move(outputs)),
        s_(shape),
        lanes_(lanes),
        cg_(group_channels),
        weights_(std::move(weights)),
        bias_(std::move(bias)),
        threads_(threads),
        rows_(PickRows(s_, lanes, group_channels)) {}

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t output_storage_bytes(size_t i) const override {
    return i == 0 ? static_cast<size_t>(s_.n * s_.blocks * s_.oh * s_.ow * lanes_) * sizeof(float)
                  : 0;
  }
  std::string implementation() const override {
    const char* isa = lanes_ == 16 ? "avx512" : "avx2";
    if (cg_ == 1) return absl::StrCat("reprise_dw:", isa);
    return absl::StrCat("reprise_dw:", isa, " (groups of ", cg_, " channels)");
  }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0]);
    float* y = static_cast<float*>(args.outputs[0]);
    // A row's cost in nanoseconds: about 0.6 per tap, input channel of the group and output
    // vector (MobileNetV2's 144 channels at 56x56, 3x3: 160 us for 28224 vectors on one
    // AVX-512 thread) and 2 for the activation.
    const double cost =
        static_cast<double>(s_.ow) * (0.6 * static_cast<double>(s_.kh * s_.kw * cg_) + 2);
    ParallelFor(s_.n * s_.blocks * s_.oh, threads_, cost, [&](int64_t begin, int64_t end) {
      rows_(s_, x, weights_.data(), bias_.data(), y, begin, end);
    });
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  DwShape s_;
  int64_t lanes_;
  int64_t cg_;                  // input (and output) channels per group: 1, 2, 4 or 8
  std::vector<float> weights_;  // [CB, KH x KW, cg, lanes], zeros past C
  std::vector<float> bias_;     // [CB, lanes], zeros past C
  int threads_;
  DwRowsFn rows_;
};

}  // namespace

std::unique_ptr<PreparedKernel> MaybeOwnDepthwise(const PrepareContext& context,
                                                  const OwnDepthwise& dw) {
  const std::optional<DwActivation> act = DwActivationOf(dw.activation);
  const int64_t lanes = dw.lanes, cg = dw.group_channels;
  if (!act.has_value() || (lanes != 16 && lanes != 8) || dw.x.size() != 4 || dw.y.size() != 4 ||
      dw.weights == nullptr || (cg != 1 && cg != 2 && cg != 4 && cg != 8) || cg >= lanes ||
      dw.x[1] % cg != 0) {
    return nullptr;
  }
  DwShape s;
  s.n = dw.x[0];
  s.channels = dw.x[1];
  s.blocks = (s.channels + lanes - 1) / lanes;
  // (rows, columns) of each 2-D quantity.
  const auto rows_columns = [](const std::vector<int64_t>& v, size_t at, int64_t* rows,
                               int64_t* columns) {
    *rows = v[at];
    *columns = v[at + 1];
  };
  rows_columns(dw.x, 2, &s.h, &s.w);
  rows_columns(dw.y, 2, &s.oh, &s.ow);
  rows_columns(dw.kernel, 0, &s.kh, &s.kw);
  rows_columns(dw.strides, 0, &s.sh, &s.sw);
  rows_columns(dw.dilations, 0, &s.dh, &s.dw);
  rows_columns(dw.pads_begin, 0, &s.ph, &s.pw);
  s.act = *act;
  if (s.act == DwActivation::kClip) {
    s.p0 = dw.activation.clip_min;
    s.p1 = dw.activation.clip_max;
  } else if (s.act == DwActivation::kLeakyRelu || s.act == DwActivation::kHardSigmoid) {
    s.p0 = dw.activation.alpha;
    s.p1 = dw.activation.beta;
  }
  // Columns whose every tap reads inside X: ox sw - pw >= 0 and ox sw - pw + (KW - 1) dw < W.
  s.ow_lo = std::min(s.ow, (s.pw + s.sw - 1) / s.sw);
  const int64_t last = s.w - 1 - (s.kw - 1) * s.dw + s.pw;  // the largest ox sw that fits
  s.ow_hi = last < 0 ? s.ow_lo : std::clamp(last / s.sw + 1, s.ow_lo, s.ow);
  // The blocked output's floats (C rounded up to whole blocks), counted with checks.
  if (!runtime::CheckedElementCount(
           {s.n, s.blocks * lanes, s.oh, s.ow},
           static_cast<int64_t>(std::numeric_limits<int64_t>::max() / sizeof(float)))
           .has_value()) {
    return nullptr;
  }
  const int64_t taps = s.kh * s.kw;
  std::vector<float> weights(static_cast<size_t>(s.blocks * taps * cg * lanes), 0.0f);
  std::vector<float> bias(static_cast<size_t>(s.blocks * lanes), 0.0f);
  for (int64_t c = 0; c < s.channels; ++c) {
    const int64_t block = c / lanes, lane = c % lanes;
    for (int64_t t = 0; t < taps; ++t) {
      for (int64_t ci = 0; ci < cg; ++ci) {
        weights[((block * taps + t) * cg + ci) * lanes + lane] =
            dw.weights[(c * cg + ci) * taps + t];
      }
    }
    if (dw.bias != nullptr) bias[block * lanes + lane] = dw.bias[c];
  }
  return std::make_unique<DepthwiseKernel>(
      std::string(context.op), std::vector<TensorDesc>{Desc(DataType::kFloat32, dw.y)}, s, lanes,
      cg, std::move(weights), std::move(bias), context.intra_op_threads);
}

namespace {

using dnnl::memory;

// A 1-D depthwise convolution on our kernel (OwnDepthwise over [N, C, 1, L] in the channel-
// blocked layout, which nCw16c / nCw8c are byte for byte), X and Y reordered into and out of
// that layout in the workspace where they are stored otherwise. oneDNN 2.6 has only its
// gemm-based code for wide ones (a Conformer's width 31 over 49 positions, 144 channels,
// batch 8, one thread: 1.45 ms against ONNX Runtime's 0.48 ms).
class Depthwise1dKernel final : public PreparedKernel {
 public:
  Depthwise1dKernel(absl::string_view op, std::vector<TensorDesc> outputs,
                    std::unique_ptr<PreparedKernel> inner, memory::desc x_stored,
                    memory::desc x_blocked, memory::desc y_blocked, memory::desc y_stored,
                    int threads, size_t num_inputs)
      : op_(op),
        outputs_(std::move(outputs)),
        inner_(std::move(inner)),
        x_stored_(x_stored),
        x_blocked_(x_blocked),
        y_blocked_(y_blocked),
        y_stored_(y_stored),
        threads_(threads),
        num_inputs_(num_inputs) {
    const dnnl::engine& engine = CpuEngine();
    if (x_stored_ != x_blocked_) {
      x_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_stored_, engine, x_blocked_));
      x_at_ = ConvAlignUp(inner_->workspace_bytes());
    }
    y_at_ = x_at_ + ConvAlignUp(x_reorder_ ? x_blocked_.get_size() : 0);
    if (y_stored_ != y_blocked_) {
      y_reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, y_blocked_, engine, y_stored_));
    }
    total_ = y_at_ + ConvAlignUp(y_reorder_ ? y_blocked_.get_size() : 0);
  }

  absl::string_view op() const override { return op_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return total_; }
  size_t output_storage_bytes(size_t i) const override { return i == 0 ? y_stored_.get_size() : 0; }
  std::string implementation() const override {
    return absl::StrCat(inner_->implementation(), " (1-D, blocked)");
  }
  uint64_t settling_runs() const override { return inner_->settling_runs(); }

  absl::Status Run(const KernelArgs& args) const override {
    if (runtime::NumElements(outputs_[0].shape) == 0) return absl::OkStatus();
    UseIntraOpThreads(threads_);
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    try {
      const dnnl::engine& engine = CpuEngine();
      dnnl::stream& stream = ThreadStream();
      std::vector<const void*> inputs(args.inputs, args.inputs + num_inputs_);
      void* y = args.outputs[0];
      if (x_reorder_) {
        memory from(x_stored_, engine, const_cast<void*>(args.inputs[0]));
        memory to(x_blocked_, engine, ws + x_at_);
        x_reorder_.execute(stream, from, to);
        stream.wait();
        inputs[0] = ws + x_at_;
      }
      if (y_reorder_) y = ws + y_at_;
      KernelArgs inner = args;
      inner.inputs = inputs.data();
      inner.outputs = &y;
      RETURN_IF_ERROR(inner_->Run(inner));
      if (y_reorder_) {
        memory from(y_blocked_, engine, y);
        memory to(y_stored_, engine, args.outputs[0]);
        y_reorder_.execute(stream, from, to);
        stream.wait();
      }
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(op_, ": onednn reorder failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::string op_;
  std::vector<TensorDesc> outputs_;
  std::unique_ptr<PreparedKernel> inner_;
  memory::desc x_stored_, x_blocked_, y_blocked_, y_stored_;
  int threads_ = 1;
  size_t num_inputs_ = 0;  // X, W and B when given
  dnnl::reorder x_reorder_, y_reorder_;
  size_t x_at_ = 0, y_at_ = 0, total_ = 0;
};

}  // namespace

std::unique_ptr<PreparedKernel> OwnDepthwiseFor(const PrepareContext& context,
                                                const ConvGeometry& g, const ConvPostOps& post) {
  const memory::format_tag chain = ChainTag(context);
  const int64_t lanes = chain == memory::format_tag::nChw16c  ? 16
                        : chain == memory::format_tag::nChw8c ? 8
                                                              : 0;
  const bool one_d = g.x.size() == 3;
  // Input (and output) channels per group: 1 (depthwise), or a narrow group (2D only).
  const int64_t cg = g.group >= 2 && g.x[1] % g.group == 0 ? g.x[1] / g.group : 0;
  if (!CpuOptionsOf(context).conv_own_depthwise || lanes == 0 || (g.x.size() != 4 && !one_d) ||
      cg == 0 || (one_d && cg != 1) || g.w[0] != g.x[1] || g.w[1] != cg || !g.known_weights ||
      post.residual || post.depthwise.has_value() || g.y != g.y_out ||
      (g.has_bias && context.inputs[2].data == nullptr) ||
      (!one_d && (post.x != Storage::kBlocked || post.y != Storage::kBlocked)) ||
      (one_d && g.group < 2)) {  // (one channel: an ordinary convolution, on oneDNN)
    return nullptr;
  }
  // A 1-D convolution as a 2-D one over one row: [N, C, L] as [N, C, 1, L], a window's [k]
  // as [row, k].
  const auto two_d = [&](const std::vector<int64_t>& v, int64_t row) {
    std::vector<int64_t> out = v;
    if (one_d) out.insert(out.end() - 1, row);
    return out;
  };
  OwnDepthwise dw;
  dw.x = two_d(g.x, 1);
  dw.y = two_d(g.y, 1);
  dw.kernel = two_d(g.win.kernel, 1);
  dw.strides = two_d(g.win.strides, 1);
  dw.dilations = two_d(g.win.dilations, 1);
  dw.pads_begin = two_d(g.win.pads_begin, 0);
  dw.weights = static_cast<const float*>(g.weights);
  dw.bias = g.has_bias ? static_cast<const float*>(context.inputs[2].data) : nullptr;
  dw.activation = post.activation;
  dw.lanes = lanes;
  dw.group_channels = cg;
  std::unique_ptr<PreparedKernel> inner = MaybeOwnDepthwise(context, dw);
  if (inner == nullptr || !one_d) return inner;
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, g.y)};
  return std::make_unique<Depthwise1dKernel>(
      context.op, std::move(outputs), std::move(inner), StoredDesc(g.x, post.x, chain),
      StoredDesc(g.x, Storage::kBlocked, chain), StoredDesc(g.y, Storage::kBlocked, chain),
      StoredDesc(g.y, post.y, chain), context.intra_op_threads, context.inputs.size());
}

}  // namespace reprise::kernels::cpu
