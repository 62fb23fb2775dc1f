// MaxPool (with dilations and the optional Indices output), AveragePool (count_include_pad),
// both with ceil_mode and auto_pad over 1-D/2-D/3-D, GlobalAveragePool / GlobalMaxPool,
// MaxUnpool.
// Own loops (float32): they follow ONNX's ceil_mode and padding-count rules exactly, which
// oneDNN's pooling does not express directly.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/float8.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/window.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

namespace reprise::kernels::cpu {

AxisTaps MakeAxisTaps(const Window& g, int axis) {
  AxisTaps t;
  const int64_t k = g.kernel[axis], s = g.strides[axis], d = g.dilations[axis];
  const int64_t in = g.input[axis], pb = g.pads_begin[axis], pe = g.pads_end[axis];
  // The number of taps t in [0, k) with origin + t * d < limit, i.e. ceil((limit - origin) / d)
  // clamped to [0, k]: computed, not counted (a model may declare a kernel of 2^40 taps).
  auto taps_below = [k, d](int64_t origin, int64_t limit) -> int64_t {
    if (limit <= origin) return 0;
    const uint64_t span = static_cast<uint64_t>(limit) - static_cast<uint64_t>(origin);
    const uint64_t n = span / static_cast<uint64_t>(d) + (span % static_cast<uint64_t>(d) != 0);
    return n >= static_cast<uint64_t>(k) ? k : static_cast<int64_t>(n);
  };
  for (int64_t o = 0; o < g.output[axis]; ++o) {
    const int64_t origin = o * s - pb;
    const int64_t first = taps_below(origin, 0);
    const int64_t last = std::max(first, taps_below(origin, in));
    const int64_t padded = taps_below(origin, in + pe);
    t.origin.push_back(origin);
    t.first.push_back(first);
    t.last.push_back(std::max(first, last));
    t.padded.push_back(padded);
  }
  return t;
}

namespace {

// Reductions of a plane in eight independent lanes (vectorised; one chain of dependent adds
// would cost an add's latency per element). The sum adds each block of 256 in float and the
// blocks in double, so that large planes keep their precision.
constexpr int kLanes = 8;

double SumOfFloats(const float* x, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n;) {
    const int64_t end = std::min<int64_t>(n, i + 256);
    float lanes[kLanes] = {};
    for (; i + kLanes <= end; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) lanes[k] += x[i + k];
    }
    for (; i < end; ++i) lanes[0] += x[i];
    float block = 0;
    for (float lane : lanes) block += lane;
    total += block;
  }
  return total;
}

float MaxOfFloats(const float* x, int64_t n) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  }
  for (; i < n; ++i) lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
  float best = lanes[0];
  for (float lane : lanes) best = lane > best ? lane : best;
  return best;
}

// The output positions [lo, hi) along one axis whose window lies wholly inside the input (every
// tap counts): a contiguous run, since the windows move forward with the position.
std::pair<int64_t, int64_t> InteriorRange(const AxisTaps& t, int64_t kernel) {
  int64_t lo = 0;
  const int64_t n = static_cast<int64_t>(t.first.size());
  while (lo < n && (t.first[lo] != 0 || t.last[lo] != kernel)) ++lo;
  int64_t hi = lo;
  while (hi < n && t.first[hi] == 0 && t.last[hi] == kernel) ++hi;
  return {lo, hi};
}

// One plane of 2-D pooling without dilation or indices, separably: per output row, the rows
// of its window reduced into a row buffer (contiguous, vectorised), then the columns of each
// output's window reduced from it (vectorised across the outputs whose windows lie wholly
// inside; strides 1 and 2 with a constant stride, others after splitting the row into its
// phases). Max is exact; the average sums in another order than the general loop (rows first,
// then the taps in order). Compiled per instruction set (PickForThisCpu).
struct SeparablePlane {
  const AxisTaps* th;
  const AxisTaps* tw;
  int64_t in_w, out_h, out_w, stride, kernel;
  int64_t interior_begin, interior_end;  // InteriorRange along W
  bool include_pad;
  // The average's divisor along W per output column (the padded window's width with
  // include_pad, else its taps inside), as a float: a row's divisors are its row count times
  // these, divided by in one vectorised pass.
  const float* column_divisor;
};

// The scratch floats PoolPlane2d needs: the reduced row, and for strides above 2 the phases the
// taps read. An interior window lies inside the row, so kernel <= span <= in_w, and
// min(stride, kernel) phases of ceil(span / stride) floats are fewer than 2 * in_w.
int64_t PlaneScratchFloats(const SeparablePlane& p) { return p.stride > 2 ? 3 * p.in_w : p.in_w; }

// o[i] op= base[i * stride + kw] for every tap kw of the interior windows; kStride 0: `stride`
// given at run time (> 2), through the phases of base (phase q holds base[q], base[q + s], ...).
template <bool kMax, int64_t kStride>
__attribute__((always_inline)) inline void ReduceInteriorColumns(const float* __restrict base,
                                                                 float* __restrict o, int64_t n,
                                                                 int64_t kernel, int64_t stride,
                                                                 float* __restrict phases) {
  const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  for (int64_t i = 0; i < n; ++i) o[i] = init;
  if (kStride != 0) {
    for (int64_t kw = 0; kw < kernel; ++kw) {
      const float* __restrict src = base + kw;
      for (int64_t i = 0; i < n; ++i) {
        const float v = src[i * kStride];
        o[i] = kMax ? std::max(o[i], v) : o[i] + v;
      }
    }
    return;
  }
  const int64_t span = (n - 1) * stride + kernel;
  const int64_t per_phase = (span + stride - 1) / stride;
  const int64_t used = std::min(stride, kernel);
  for (int64_t q = 0; q < used; ++q) {
    float* __restrict dst = phases + q * per_phase;
    const int64_t count = (span - q + stride - 1) / stride;
    for (int64_t j = 0; j < count; ++j) dst[j] = base[q + j * stride];
  }
  for (int64_t kw = 0; kw < kernel; ++kw) {
    // base[i * stride + kw] is entry i + kw / stride of phase kw % stride.
    const float* __restrict src = phases + (kw % stride) * per_phase + kw / stride;
    for (int64_t i = 0; i < n; ++i) o[i] = kMax ? std::max(o[i], src[i]) : o[i] + src[i];
  }
}

// The rows [r0, r1) of `in` (rows of n floats) reduced (max or sum) into r, or the one row in
// place when r1 - r0 == 1: the first pass of the separable pools, vectorised along the row.
template <bool kMax>
__attribute__((always_inline)) inline const float* ReduceRows(const float* __restrict in,
                                                              int64_t r0, int64_t r1, int64_t n,
                                                              float* __restrict r) {
  const float* __restrict row = in + r0 * n;
  if (r1 - r0 == 1) return row;
  const float* __restrict next = row + n;
  for (int64_t i = 0; i < n; ++i) r[i] = kMax ? std::max(row[i], next[i]) : row[i] + next[i];
  for (int64_t at = r0 + 2; at < r1; ++at) {
    const float* __restrict src = in + at * n;
    for (int64_t i = 0; i < n; ++i) r[i] = kMax ? std::max(r[i], src[i]) : r[i] + src[i];
  }
  return r;
}

template <bool kMax>
__attribute__((always_inline)) inline void PoolPlane2dBody(const float* __restrict in,
                                                           float* __restrict out,
                                                           const SeparablePlane& p,
                                                           float* __restrict scratch) {
  const AxisTaps& th = *p.th;
  const AxisTaps& tw = *p.tw;
  const int64_t in_w = p.in_w, out_w = p.out_w;
  const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  float* __restrict r = scratch;
  float* __restrict phases = scratch + in_w;
  for (int64_t oh = 0; oh < p.out_h; ++oh, out += out_w) {
    const int64_t r0 = th.origin[oh] + th.first[oh];
    const int64_t r1 = th.origin[oh] + th.last[oh];
    if (r0 >= r1) {
      // Every tap is padding: the general loop's answer (-inf, or 0 with no divisor).
      std::fill(out, out + out_w, kMax ? init : 0.0f);
      continue;
    }
    const float* __restrict reduced = ReduceRows<kMax>(in, r0, r1, in_w, r);
    auto reduce_one = [&](int64_t ow) {
      float acc = init;
      for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) {
        const float v = reduced[tw.origin[ow] + kw];
        acc = kMax ? std::max(acc, v) : acc + v;
      }
      return acc;
    };
    for (int64_t ow = 0; ow < p.interior_begin; ++ow) out[ow] = reduce_one(ow);
    for (int64_t ow = p.interior_end; ow < out_w; ++ow) out[ow] = reduce_one(ow);
    if (p.interior_begin < p.interior_end) {
      float* o = out + p.interior_begin;
      const int64_t n = p.interior_end - p.interior_begin;
      const float* base = reduced + tw.origin[p.interior_begin];
      if (p.stride == 1) {
        ReduceInteriorColumns<kMax, 1>(base, o, n, p.kernel, 1, phases);
      } else if (p.stride == 2) {
        ReduceInteriorColumns<kMax, 2>(base, o, n, p.kernel, 2, phases);
      } else {
        ReduceInteriorColumns<kMax, 0>(base, o, n, p.kernel, p.stride, phases);
      }
    }
    if (!kMax) {
      const float rows = static_cast<float>(p.include_pad ? th.padded[oh] : r1 - r0);
      const float* __restrict columns = p.column_divisor;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const float divisor = rows * columns[ow];
        out[ow] = divisor > 0.0f ? out[ow] / divisor : 0.0f;
      }
    }
  }
}

#define REPRISE_POOL_PLANE_ARGS const float *in, float *out, const SeparablePlane &p, float *scratch
using PoolPlaneFn = void (*)(REPRISE_POOL_PLANE_ARGS);
__attribute__((target("avx512f"))) void MaxPlaneAvx512(REPRISE_POOL_PLANE_ARGS) {
  PoolPlane2dBody<true>(in, out, p, scratch);
}
__attribute__((target("avx2,fma"))) void MaxPlaneAvx2(REPRISE_POOL_PLANE_ARGS) {
  PoolPlane2dBody<true>(in, out, p, scratch);
}
void MaxPlaneBaseline(REPRISE_POOL_PLANE_ARGS) { PoolPlane2dBody<true>(in, out, p, scratch); }
__attribute__((target("avx512f"))) void AvgPlaneAvx512(REPRISE_POOL_PLANE_ARGS) {
  PoolPlane2dBody<false>(in, out, p, scratch);
}
__attribute__((target("avx2,fma"))) void AvgPlaneAvx2(REPRISE_POOL_PLANE_ARGS) {
  PoolPlane2dBody<false>(in, out, p, scratch);
}
void AvgPlaneBaseline(REPRISE_POOL_PLANE_ARGS) { PoolPlane2dBody<false>(in, out, p, scratch); }
#undef REPRISE_POOL_PLANE_ARGS

template <bool kMax>
PoolPlaneFn PoolPlane2d() {
  static const PoolPlaneFn fn =
      kMax ? PickForThisCpu(&MaxPlaneAvx512, &MaxPlaneAvx2, &MaxPlaneBaseline)
           : PickForThisCpu(&AvgPlaneAvx512, &AvgPlaneAvx2, &AvgPlaneBaseline);
  return fn;
}

// InterleavedPool's work: items [begin, end) of the (image, group) planes x output rows.
struct InterleavedRows {
  const AxisTaps* th;
  const AxisTaps* tw;
  int64_t channels, lanes, groups, in_h, in_w, out_h, out_w;
  int64_t stride_w, kernel_w;
  int64_t interior_begin, interior_end;  // InteriorRange along W
  bool include_pad;
};

// The outputs [begin, end) of a row whose windows lie inside it (taps 0 .. taps-1 read), for
// blocked lanes: named vector registers (GCC leaves a loop over the lanes of the output scalar
// here, and keeps an array of vectors on the stack), the second for 16 lanes. kTaps: `taps` as
// a constant (2, 3: unrolled), or 0. The average scales by inverse[ow].
template <bool kMax, int64_t kLanes, int64_t kTaps>
__attribute__((always_inline)) inline void BlockedColumns(const float* __restrict row,
                                                          float* __restrict out, int64_t begin,
                                                          int64_t end, int64_t origin,
                                                          int64_t stride, int64_t taps,
                                                          const float* __restrict inverse) {
  static_assert(kLanes == 8 || kLanes == 16);
  const int64_t n = kTaps != 0 ? kTaps : taps;
  for (int64_t ow = begin; ow < end; ++ow) {
    const float* __restrict src = row + (origin + (ow - begin) * stride) * kLanes;
    Float8 a0, a1 = {};
    __builtin_memcpy(&a0, src, sizeof a0);
    if constexpr (kLanes == 16) __builtin_memcpy(&a1, src + 8, sizeof a1);
    for (int64_t kw = 1; kw < n; ++kw) {
      src += kLanes;
      Float8 t0, t1;
      __builtin_memcpy(&t0, src, sizeof t0);
      a0 = kMax ? (a0 < t0 ? t0 : a0) : a0 + t0;  // std::max's choice, lane by lane
      if constexpr (kLanes == 16) {
        __builtin_memcpy(&t1, src + 8, sizeof t1);
        a1 = kMax ? (a1 < t1 ? t1 : a1) : a1 + t1;
      }
    }
    if constexpr (!kMax) {
      a0 *= inverse[ow];
      a1 *= inverse[ow];
    }
    __builtin_memcpy(out + ow * kLanes, &a0, sizeof a0);
    if constexpr (kLanes == 16) __builtin_memcpy(out + ow * kLanes + 8, &a1, sizeof a1);
  }
}

// kLanes: p.lanes as a constant (8, 16), or 0 for channels-last's run-time count. `r` holds a
// row of in_w x lanes floats, then out_w for the average's reciprocal divisors.
template <bool kMax, int64_t kLanes>
__attribute__((always_inline)) inline void InterleavedRowsBody(const float* __restrict x,
                                                               float* __restrict y,
                                                               const InterleavedRows& p,
                                                               int64_t begin, int64_t end,
                                                               float* __restrict r) {
  const AxisTaps& th = *p.th;
  const AxisTaps& tw = *p.tw;
  const int64_t lanes = kLanes != 0 ? kLanes : p.lanes;
  const int64_t row_floats = p.in_w * lanes;
  const int64_t plane_floats = p.in_h * row_floats;
  const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  // The average multiplies by 1 / divisor, a row of them computed again only where the row's
  // factor (rows inside, or inside the padding) changes: a division per output would cost as
  // much as the sums.
  float* __restrict inverse = r + row_floats;
  int64_t inverse_for = -1;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t plane = item / p.out_h, oh = item % p.out_h;
    // Lanes past the channels (the last group's padding) stay zero.
    const int64_t valid = std::min(lanes, p.channels - (plane % p.groups) * lanes);
    const float* __restrict in = x + plane * plane_floats;
    float* __restrict out = y + item * p.out_w * lanes;
    auto empty = [&](float* __restrict o) {
      for (int64_t c = 0; c < lanes; ++c) o[c] = c < valid ? init : 0.0f;
    };
    const int64_t r0 = th.origin[oh] + th.first[oh];
    const int64_t r1 = th.origin[oh] + th.last[oh];
    if (r0 >= r1) {
      // Every tap is padding: the general loop's answer (-inf, or 0 with no divisor).
      for (int64_t ow = 0; ow < p.out_w; ++ow) empty(out + ow * lanes);
      continue;
    }
    // The window's rows reduced into `r` (vectorised over W x lanes; a single row is read in
    // place), then each output's columns from it.
    const int64_t rows_in = r1 - r0;
    if (!kMax) {
      const int64_t factor = p.include_pad ? th.padded[oh] : rows_in;
      if (factor != inverse_for) {
        for (int64_t ow = 0; ow < p.out_w; ++ow) {
          const int64_t divisor =
              factor * (p.include_pad ? tw.padded[ow] : tw.last[ow] - tw.first[ow]);
          inverse[ow] = divisor > 0 ? 1.0f / static_cast<float>(divisor) : 0.0f;
        }
        inverse_for = factor;
      }
    }
    const float* __restrict row = ReduceRows<kMax>(in, r0, r1, row_floats, r);
    // Outputs whose window is partly outside the row: from their own taps.
    auto edge = [&](int64_t ow) {
      float* __restrict o = out + ow * lanes;
      const int64_t first = tw.first[ow], last = tw.last[ow];
      if (first >= last) {
        empty(o);
        return;
      }
      const float* __restrict src = row + (tw.origin[ow] + first) * lanes;
      for (int64_t c = 0; c < lanes; ++c) o[c] = src[c];
      for (int64_t kw = first + 1; kw < last; ++kw) {
        src += lanes;
        for (int64_t c = 0; c < lanes; ++c) o[c] = kMax ? std::max(o[c], src[c]) : o[c] + src[c];
      }
      if (!kMax) {
        const float scale = inverse[ow];
        for (int64_t c = 0; c < lanes; ++c) o[c] *= scale;
      }
    };
    const int64_t ib = p.interior_begin, ie = p.interior_end;
    if constexpr (kLanes != 0) {
      for (int64_t ow = 0; ow < ib; ++ow) edge(ow);
      if (ib < ie) {
        const int64_t origin = tw.origin[ib];
        if (p.kernel_w == 3) {
          BlockedColumns<kMax, kLanes, 3>(row, out, ib, ie, origin, p.stride_w, 3, inverse);
        } else if (p.kernel_w == 2) {
          BlockedColumns<kMax, kLanes, 2>(row, out, ib, ie, origin, p.stride_w, 2, inverse);
        } else {
          BlockedColumns<kMax, kLanes, 0>(row, out, ib, ie, origin, p.stride_w, p.kernel_w,
                                          inverse);
        }
      }
      for (int64_t ow = std::max(ib, ie); ow < p.out_w; ++ow) edge(ow);
    } else {
      // Channels-last: vectorised over the channels.
      for (int64_t ow = 0; ow < p.out_w; ++ow) edge(ow);
    }
  }
}

template <bool kMax>
__attribute__((always_inline)) inline void InterleavedRowsAnyLanes(const float* x, float* y,
                                                                   const InterleavedRows& p,
                                                                   int64_t begin, int64_t end,
                                                                   float* r) {
  if (p.lanes == 8) {
    InterleavedRowsBody<kMax, 8>(x, y, p, begin, end, r);
  } else if (p.lanes == 16) {
    InterleavedRowsBody<kMax, 16>(x, y, p, begin, end, r);
  } else {
    InterleavedRowsBody<kMax, 0>(x, y, p, begin, end, r);
  }
}

#define REPRISE_ROWS_ARGS \
  const float *x, float *y, const InterleavedRows &p, int64_t begin, int64_t end, float *r
using InterleavedRowsFn = void (*)(REPRISE_ROWS_ARGS);
__attribute__((target("avx512f"))) void MaxRowsAvx512(REPRISE_ROWS_ARGS) {
  InterleavedRowsAnyLanes<true>(x, y, p, begin, end, r);
}
__attribute__((target("avx2,fma"))) void MaxRowsAvx2(REPRISE_ROWS_ARGS) {
  InterleavedRowsAnyLanes<true>(x, y, p, begin, end, r);
}
void MaxRowsBaseline(REPRISE_ROWS_ARGS) { InterleavedRowsAnyLanes<true>(x, y, p, begin, end, r); }
__attribute__((target("avx512f"))) void AvgRowsAvx512(REPRISE_ROWS_ARGS) {
  InterleavedRowsAnyLanes<false>(x, y, p, begin, end, r);
}
__attribute__((target("avx2,fma"))) void AvgRowsAvx2(REPRISE_ROWS_ARGS) {
  InterleavedRowsAnyLanes<false>(x, y, p, begin, end, r);
}
void AvgRowsBaseline(REPRISE_ROWS_ARGS) { InterleavedRowsAnyLanes<false>(x, y, p, begin, end, r); }
#undef REPRISE_ROWS_ARGS

absl::StatusOr<Shape> CheckPoolInput(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() < 3 || x.size() > 5) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(x),
                           " is not [N,C,D1..Dk] with k in 1..3");
  }
  return x;
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PreparePool(const PrepareContext& context) {
  ASSIGN_OR_RETURN(Shape x, CheckPoolInput(context));
  const Attributes& attrs = AttrsOf(context);
  if (!attrs.Has("kernel_shape")) return InvalidArgument(context, "kernel_shape is required");
  ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.GetInt("ceil_mode", 0));
  ASSIGN_OR_RETURN(int64_t include_pad, attrs.GetInt("count_include_pad", 0));
  ASSIGN_OR_RETURN(int64_t storage_order, attrs.GetInt("storage_order", 0));
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  ASSIGN_OR_RETURN(Window win, ForwardWindow(context, spatial, {}, ceil_mode != 0));
  Shape y = {x[0], x[1]};
  y.insert(y.end(), win.output.begin(), win.output.end());
  // The taps below take a few words per output position along each axis.
  if (!runtime::CheckedElementCount(y, std::numeric_limits<int64_t>::max() / 64).has_value()) {
    return InvalidArgument(context, "output shape ", runtime::ShapeToString(y), " is too large");
  }
  const Window g = To3d(win);
  const int64_t planes = x[0] * x[1];
  const int64_t in_size = g.input[0] * g.input[1] * g.input[2];
  const bool with_indices = kMax && context.num_outputs > 1;
  if (with_indices && storage_order != 0 && spatial.size() != 2) {
    return Unimplemented(context, "storage_order=1 is supported for 2-D pooling only");
  }
  std::vector<TensorDesc> outputs = {Desc(DataType::kFloat32, y)};
  if (with_indices) outputs.push_back(Desc(DataType::kInt64, y));
  std::array<AxisTaps, 3> taps;
  for (int a = 0; a < 3; ++a) taps[a] = MakeAxisTaps(g, a);
  const int threads = context.intra_op_threads;
  const int64_t out_size = g.output[0] * g.output[1] * g.output[2];
  // Per plane: each output reads its window.
  int64_t window = 1;
  for (int64_t k : win.kernel) window *= k;
  const double plane_cost = static_cast<double>(out_size) * static_cast<double>(window + 2);
  // 2-D windows without dilation or indices go separably (PoolPlane2d).
  const bool separable = g.input[0] == 1 && g.kernel[0] == 1 && g.pads_begin[0] == 0 &&
                         g.pads_end[0] == 0 && g.dilations[1] == 1 && g.dilations[2] == 1 &&
                         !with_indices;
  const std::pair<int64_t, int64_t> interior = InteriorRange(taps[2], g.kernel[2]);
  const PoolPlaneFn plane_fn = PoolPlane2d<kMax>();
  std::vector<float> column_divisor;
  if (separable) {
    for (int64_t ow = 0; ow < g.output[2]; ++ow) {
      column_divisor.push_back(static_cast<float>(
          include_pad != 0 ? taps[2].padded[ow] : taps[2].last[ow] - taps[2].first[ow]));
    }
  }
  return MakeKernel(context, std::move(outputs), [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    int64_t* ip = with_indices ? static_cast<int64_t*>(args.outputs[1]) : nullptr;
    const AxisTaps& td = taps[0];
    const AxisTaps& th = taps[1];
    const AxisTaps& tw = taps[2];
    const int64_t dil_d = g.dilations[0], dil_h = g.dilations[1], dil_w = g.dilations[2];
    const int64_t in_h = g.input[1], in_w = g.input[2];
    if (separable) {
      const SeparablePlane plane{&th,
                                 &tw,
                                 in_w,
                                 g.output[1],
                                 g.output[2],
                                 g.strides[2],
                                 g.kernel[2],
                                 interior.first,
                                 interior.second,
                                 include_pad != 0,
                                 column_divisor.data()};
      ParallelFor(
          planes, threads, plane_cost,
          [&](int64_t first_plane, int64_t end_plane) {
            std::vector<float> scratch(static_cast<size_t>(PlaneScratchFloats(plane)));
            for (int64_t p = first_plane; p < end_plane; ++p) {
              plane_fn(xp + p * in_size, yp + p * out_size, plane, scratch.data());
            }
          },
          1);
      return absl::OkStatus();
    }
    // Planes split over the intra-op threads; each is computed as serially.
    ParallelFor(
        planes, threads, plane_cost,
        [&](int64_t first_plane, int64_t end_plane) {
          for (int64_t p = first_plane; p < end_plane; ++p) {
            const float* in = xp + p * in_size;
            int64_t o = p * out_size;
            for (int64_t od = 0; od < g.output[0]; ++od) {
              for (int64_t oh = 0; oh < g.output[1]; ++oh) {
                for (int64_t ow = 0; ow < g.output[2]; ++ow, ++o) {
                  float best = -std::numeric_limits<float>::infinity();
                  int64_t best_at = -1;
                  float sum = 0;
                  for (int64_t kd = td.first[od]; kd < td.last[od]; ++kd) {
                    const int64_t d = td.origin[od] + kd * dil_d;
                    for (int64_t kh = th.first[oh]; kh < th.last[oh]; ++kh) {
                      const int64_t row =
                          (d * in_h + th.origin[oh] + kh * dil_h) * in_w + tw.origin[ow];
                      const float* r = in + row;
                      if (kMax && ip == nullptr) {
                        for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) {
                          best = std::max(best, r[kw * dil_w]);
                        }
                      } else if (kMax) {
                        for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw) {
                          const float v = r[kw * dil_w];
                          if (v > best || best_at < 0) {
                            best = v;
                            best_at = row + kw * dil_w;
                          }
                        }
                      } else {
                        for (int64_t kw = tw.first[ow]; kw < tw.last[ow]; ++kw)
                          sum += r[kw * dil_w];
                      }
                    }
                  }
                  if (kMax) {
                    yp[o] = best;
                    if (ip != nullptr) {
                      int64_t index = best_at;
                      if (storage_order != 0 && best_at >= 0)
                        index = (best_at % in_w) * in_h + best_at / in_w;
                      ip[o] = p * in_size + index;
                    }
                  } else {
                    const int64_t divisor = include_pad != 0
                                                ? td.padded[od] * th.padded[oh] * tw.padded[ow]
                                                : (td.last[od] - td.first[od]) *
                                                      (th.last[oh] - th.first[oh]) *
                                                      (tw.last[ow] - tw.first[ow]);
                    yp[o] = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
                  }
                }
              }
            }
          }
        },
        1);
    return absl::OkStatus();
  });
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareGlobalPool(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() < 2) {
    return InvalidArgument(context, "input shape ", runtime::ShapeToString(x),
                           " has no spatial axes");
  }
  Shape y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  const int64_t planes = x[0] * x[1];
  const int64_t size = planes == 0 ? 0 : runtime::NumElements(x) / planes;
  const int threads = context.intra_op_threads;
  return MakeKernel(context, {Desc(DataType::kFloat32, y)}, [=](const KernelArgs& args) {
    const float* xp = static_cast<const float*>(args.inputs[0]);
    float* yp = static_cast<float*>(args.outputs[0]);
    ParallelFor(
        planes, threads, static_cast<double>(size),
        [&](int64_t first, int64_t end) {
          for (int64_t p = first; p < end; ++p) {
            const float* in = xp + p * size;
            if (kMax) {
              yp[p] = size > 0 ? MaxOfFloats(in, size) : -std::numeric_limits<float>::infinity();
            } else {
              yp[p] = size > 0 ? static_cast<float>(SumOfFloats(in, size) / size) : 0.0f;
            }
          }
        },
        1);
    return absl::OkStatus();
  });
}

// MaxUnpool: zeros of the unpooled shape (output_shape when given, else from the window
// attributes), with X[i] written at the flat index I[i] that MaxPool reported. An index outside
// the output fails Run.
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareMaxUnpool(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 3));
  RETURN_IF_ERROR(ExpectType(context, 0, {DataType::kFloat32}));
  RETURN_IF_ERROR(ExpectType(context, 1, {DataType::kInt64}));
  const Shape& x = context.inputs[0].shape;
  if (x.size() < 3 || context.inputs[1].shape != x) {
    return InvalidArgument(context, "X ", runtime::ShapeToString(x), " and I ",
                           runtime::ShapeToString(context.inputs[1].shape),
                           " must have one shape of rank >= 3");
  }
  const size_t spatial = x.size() - 2;
  // The unpooled shape the window attributes give; MaxPool's indices are flat positions in it.
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, AttrsOf(context).GetInts("kernel_shape", {}));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                   AttrsOf(context).GetInts("strides", std::vector<int64_t>(spatial, 1)));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                   AttrsOf(context).GetInts("pads", std::vector<int64_t>(2 * spatial, 0)));
  if (kernel.size() != spatial || strides.size() != spatial || pads.size() != 2 * spatial) {
    return InvalidArgument(context, "kernel_shape, strides and pads must cover ", spatial,
                           " spatial axes");
  }
  Shape pooled = {x[0], x[1]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t dim = 0;
    if (!runtime::CheckedMul(x[i + 2] - 1, strides[i], &dim) || x[i + 2] < 1) {
      return InvalidArgument(context, "the unpooled shape is too large");
    }
    pooled.push_back(dim + kernel[i] - pads[i] - pads[i + spatial]);
  }
  // output_shape, when given, is the unpooled tensor's real shape (a pooling with ceil or padding
  // lost it); each index keeps its coordinates there.
  Shape out = pooled;
  if (HasInput(context, 2)) {
    ASSIGN_OR_RETURN(out, ReadInts(context, 2, "output_shape"));
    if (out.size() != x.size() || out[0] != x[0] || out[1] != x[1]) {
      return InvalidArgument(context, "output_shape ", runtime::ShapeToString(out),
                             " does not fit X ", runtime::ShapeToString(x));
    }
  }
  for (const Shape* shape : {&pooled, &out}) {
    if (!runtime::CheckedElementCount(*shape, int64_t{1} << 40).has_value()) {
      return InvalidArgument(context, "the unpooled shape ", runtime::ShapeToString(*shape),
                             " is negative or too large");
    }
  }
  const std::vector<int64_t> out_strides = ContiguousStrides(out);
  const int64_t pooled_total = runtime::NumElements(pooled);
  const int64_t n = runtime::NumElements(x);
  const int64_t total = runtime::NumElements(out);
  const std::string op = NodeLabel(context);
  return MakeKernel(context, {Desc(DataType::kFloat32, out)}, [=](const KernelArgs& args) {
    const float* in = static_cast<const float*>(args.inputs[0]);
    const int64_t* index = static_cast<const int64_t*>(args.inputs[1]);
    float* y = static_cast<float*>(args.outputs[0]);
    // Every index's place in the output first; nothing is written when one is out of range.
    auto place = [&](int64_t flat) -> int64_t {
      if (flat < 0 || flat >= pooled_total) return -1;
      int64_t offset = 0;
      for (size_t d = pooled.size(); d-- > 0;) {
        const int64_t coord = flat % pooled[d];
        flat /= pooled[d];
        if (coord >= out[d]) return -1;
        offset += coord * out_strides[d];
      }
      return offset;
    };
    for (int64_t i = 0; i < n; ++i) {
      if (place(index[i]) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": index ", index[i],
                                                       " is outside the unpooled shape ",
                                                       runtime::ShapeToString(pooled)));
      }
    }
    std::fill(y, y + total, 0.0f);
    for (int64_t i = 0; i < n; ++i) y[place(index[i])] = in[i];
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status RegisterPoolKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("MaxPool", &PreparePool<true>));
  RETURN_IF_ERROR(registry->Register("AveragePool", &PreparePool<false>));
  RETURN_IF_ERROR(registry->Register("GlobalMaxPool", &PrepareGlobalPool<true>));
  RETURN_IF_ERROR(registry->Register("GlobalAveragePool", &PrepareGlobalPool<false>));
  RETURN_IF_ERROR(registry->Register("MaxUnpool", &PrepareMaxUnpool));
  return absl::OkStatus();
}

InterleavedPool::InterleavedPool(const Window& win, bool max, bool include_pad, int64_t channels,
                                 int64_t lanes)
    : th_(MakeAxisTaps(win, 0)),
      tw_(MakeAxisTaps(win, 1)),
      max_(max),
      include_pad_(include_pad),
      channels_(channels),
      lanes_(lanes),
      groups_((channels + lanes - 1) / lanes),
      in_h_(win.input[0]),
      in_w_(win.input[1]),
      out_h_(win.output[0]),
      out_w_(win.output[1]),
      kernel_h_(win.kernel[0]),
      kernel_w_(win.kernel[1]),
      stride_w_(win.strides[1]),
      interior_(InteriorRange(tw_, kernel_w_)) {}

void InterleavedPool::Run(const float* x, float* y, int64_t batch, int threads) const {
  static const InterleavedRowsFn max_fn =
      PickForThisCpu(&MaxRowsAvx512, &MaxRowsAvx2, &MaxRowsBaseline);
  static const InterleavedRowsFn avg_fn =
      PickForThisCpu(&AvgRowsAvx512, &AvgRowsAvx2, &AvgRowsBaseline);
  const InterleavedRows p{
      &th_,   &tw_,      channels_, lanes_,          groups_,          in_h_,       in_w_, out_h_,
      out_w_, stride_w_, kernel_w_, interior_.first, interior_.second, include_pad_};
  const InterleavedRowsFn fn = max_ ? max_fn : avg_fn;
  // Per output row: the window's rows over the input row, then each output's columns; a
  // vector step covers about eight lanes in a fraction of a nanosecond.
  const double row_cost = static_cast<double>(in_w_ * kernel_h_ + out_w_ * kernel_w_) *
                          static_cast<double>(lanes_) * 0.1;
  ParallelFor(
      batch * groups_ * out_h_, threads, row_cost,
      [&](int64_t begin, int64_t end) {
        std::vector<float> r(static_cast<size_t>(in_w_ * lanes_ + out_w_));
        fn(x, y, p, begin, end, r.data());
      },
      1);
}

}  // namespace reprise::kernels::cpu
