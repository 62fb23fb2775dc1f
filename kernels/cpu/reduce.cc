// Reductions over axes (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp),
// ArgMax/ArgMin and CumSum. Float sums accumulate in double, integer ones in int64.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

template <Reduce kOp, typename Acc>
Acc Init() {
  if constexpr (kOp == Reduce::kMax) return std::numeric_limits<Acc>::lowest();
  if constexpr (kOp == Reduce::kMin) return std::numeric_limits<Acc>::max();
  if constexpr (kOp == Reduce::kProd) return Acc{1};
  return Acc{0};
}

template <Reduce kOp, typename Acc>
Acc Step(Acc acc, Acc x) {
  switch (kOp) {
    case Reduce::kMax:
      return x > acc ? x : acc;
    case Reduce::kMin:
      return x < acc ? x : acc;
    case Reduce::kProd:
      return acc * x;
    case Reduce::kL1:
      return acc + (x < 0 ? -x : x);
    case Reduce::kL2:
    case Reduce::kSumSquare:
      return acc + x * x;
    case Reduce::kLogSumExp:
      return acc + static_cast<Acc>(std::exp(static_cast<double>(x)));
    default:
      return acc + x;
  }
}

template <Reduce kOp, typename Acc>
Acc Finish(Acc acc, int64_t n) {
  if constexpr (kOp == Reduce::kMean) return n > 0 ? acc / static_cast<Acc>(n) : acc;
  if constexpr (kOp == Reduce::kL2) return static_cast<Acc>(std::sqrt(static_cast<double>(acc)));
  if constexpr (kOp == Reduce::kLogSum || kOp == Reduce::kLogSumExp) {
    return static_cast<Acc>(std::log(static_cast<double>(acc)));
  }
  return acc;
}

// *acc = the larger (kMax) or smaller of *acc and v, lane by lane, keeping *acc where v is NaN
// (float or a vector type; by pointer and reference, as vector_math.h's helpers).
template <bool kMax, typename T>
__attribute__((always_inline)) inline void TakeExtreme(const T& v, T* acc) {
  if constexpr (kMax) {
    *acc = v > *acc ? v : *acc;
  } else {
    *acc = v < *acc ? v : *acc;
  }
}

// The maximum (kMax) or minimum of p[0, n), n > 0, with Step's comparisons (NaN skipped; a row
// of infinities gives that infinity), four vectors of V (the copy's register width) in flight.
template <typename V, bool kMax>
__attribute__((always_inline)) inline float RowExtremeBody(const float* p, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr float kInit = kMax ? -INFINITY : INFINITY;
  V a[4];
  for (V& v : a) v = V{} + kInit;
  int64_t k = 0;
  for (; k + 4 * kLanes <= n; k += 4 * kLanes) {
    for (int j = 0; j < 4; ++j) {
      V v;
      LoadFloats(p + k + j * kLanes, &v);
      TakeExtreme<kMax>(v, &a[j]);
    }
  }
  for (; k + kLanes <= n; k += kLanes) {
    V v;
    LoadFloats(p + k, &v);
    TakeExtreme<kMax>(v, &a[0]);
  }
  TakeExtreme<kMax>(a[1], &a[0]);
  TakeExtreme<kMax>(a[3], &a[2]);
  TakeExtreme<kMax>(a[2], &a[0]);
  float acc = kInit;
  for (int64_t j = 0; j < kLanes; ++j) TakeExtreme<kMax>(a[0][j], &acc);
  for (; k < n; ++k) TakeExtreme<kMax>(p[k], &acc);
  return acc;
}
template <bool kMax>
__attribute__((target("avx512f"))) float RowExtremeAvx512(const float* p, int64_t n) {
  return RowExtremeBody<Floats16, kMax>(p, n);
}
template <bool kMax>
__attribute__((target("avx2,fma"))) float RowExtremeAvx2(const float* p, int64_t n) {
  return RowExtremeBody<Floats8, kMax>(p, n);
}
template <bool kMax>
float RowExtremeBaseline(const float* p, int64_t n) {
  return RowExtremeBody<Floats4, kMax>(p, n);
}

// v[0] = the lanes' extremes of `lanes` vectors v[j] (v[j]'s in lane j): a tree of lane
// shuffles, each level halving the partial extremes per vector and doubling the vectors per
// result (from a pair, the low halves of each run side by side against the high halves).
template <bool kMax>
__attribute__((always_inline)) inline void MergeExtremes(Floats16* v) {
  for (int j = 0; j < 16; j += 2) {
    Floats16 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19,
                                          20, 21, 22, 23);
    const Floats16 hi = __builtin_shufflevector(v[j], v[j + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24,
                                                25, 26, 27, 28, 29, 30, 31);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  for (int j = 0; j < 8; j += 2) {
    Floats16 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19,
                                          24, 25, 26, 27);
    const Floats16 hi = __builtin_shufflevector(v[j], v[j + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21,
                                                22, 23, 28, 29, 30, 31);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  for (int j = 0; j < 4; j += 2) {
    Floats16 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21,
                                          24, 25, 28, 29);
    const Floats16 hi = __builtin_shufflevector(v[j], v[j + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19,
                                                22, 23, 26, 27, 30, 31);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  Floats16 lo = __builtin_shufflevector(v[0], v[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
                                        26, 28, 30);
  const Floats16 hi = __builtin_shufflevector(v[0], v[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23,
                                              25, 27, 29, 31);
  TakeExtreme<kMax>(hi, &lo);
  v[0] = lo;
}
template <bool kMax>
__attribute__((always_inline)) inline void MergeExtremes(Floats8* v) {
  for (int j = 0; j < 8; j += 2) {
    Floats8 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 2, 3, 8, 9, 10, 11);
    const Floats8 hi = __builtin_shufflevector(v[j], v[j + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  for (int j = 0; j < 4; j += 2) {
    Floats8 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 4, 5, 8, 9, 12, 13);
    const Floats8 hi = __builtin_shufflevector(v[j], v[j + 1], 2, 3, 6, 7, 10, 11, 14, 15);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  Floats8 lo = __builtin_shufflevector(v[0], v[1], 0, 2, 4, 6, 8, 10, 12, 14);
  const Floats8 hi = __builtin_shufflevector(v[0], v[1], 1, 3, 5, 7, 9, 11, 13, 15);
  TakeExtreme<kMax>(hi, &lo);
  v[0] = lo;
}
template <bool kMax>
__attribute__((always_inline)) inline void MergeExtremes(Floats4* v) {
  for (int j = 0; j < 4; j += 2) {
    Floats4 lo = __builtin_shufflevector(v[j], v[j + 1], 0, 1, 4, 5);
    const Floats4 hi = __builtin_shufflevector(v[j], v[j + 1], 2, 3, 6, 7);
    TakeExtreme<kMax>(hi, &lo);
    v[j / 2] = lo;
  }
  Floats4 lo = __builtin_shufflevector(v[0], v[1], 0, 2, 4, 6);
  const Floats4 hi = __builtin_shufflevector(v[0], v[1], 1, 3, 5, 7);
  TakeExtreme<kMax>(hi, &lo);
  v[0] = lo;
}

// y[o] = the extreme of row o of x (rows of n values one after another) for o in [first, end),
// as RowExtremeBody gives it. Rows of one to 16 vectors go a vector's lanes of rows at a time:
// each row's vectors (its last one overlapping the one before when n is not a multiple of the
// lanes, which an extreme allows) taken to one vector, then the rows' vectors merged
// (MergeExtremes). Short rows (ReduceMax over a point's 16 or 20 neighbours) thus cost a few
// instructions each, not a call and a horizontal pass.
template <typename V, bool kMax>
__attribute__((always_inline)) inline void RowsExtremeBody(const float* x, int64_t n, float* y,
                                                           int64_t first, int64_t end) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr float kInit = kMax ? -INFINITY : INFINITY;
  int64_t o = first;
  if (n >= kLanes && n <= 16 * kLanes) {
    for (; o + kLanes <= end; o += kLanes) {
      V a[kLanes];
      for (int64_t j = 0; j < kLanes; ++j) {
        const float* p = x + (o + j) * n;
        a[j] = V{} + kInit;
        for (int64_t k = 0;; k += kLanes) {
          const int64_t at = std::min(k, n - kLanes);
          V v;
          LoadFloats(p + at, &v);
          TakeExtreme<kMax>(v, &a[j]);
          if (at == n - kLanes) break;
        }
      }
      MergeExtremes<kMax>(a);
      StoreFloats(y + o, a[0]);
    }
  }
  for (; o < end; ++o) y[o] = RowExtremeBody<V, kMax>(x + o * n, n);
}
template <bool kMax>
__attribute__((target("avx512f"))) void RowsExtremeAvx512(const float* x, int64_t n, float* y,
                                                          int64_t first, int64_t end) {
  RowsExtremeBody<Floats16, kMax>(x, n, y, first, end);
}
template <bool kMax>
__attribute__((target("avx2,fma"))) void RowsExtremeAvx2(const float* x, int64_t n, float* y,
                                                         int64_t first, int64_t end) {
  RowsExtremeBody<Floats8, kMax>(x, n, y, first, end);
}
template <bool kMax>
void RowsExtremeBaseline(const float* x, int64_t n, float* y, int64_t first, int64_t end) {
  RowsExtremeBody<Floats4, kMax>(x, n, y, first, end);
}
template <bool kMax>
void RowsExtreme(const float* x, int64_t n, float* y, int64_t first, int64_t end) {
  static const auto fn =
      PickForThisCpu(&RowsExtremeAvx512<kMax>, &RowsExtremeAvx2<kMax>, &RowsExtremeBaseline<kMax>);
  fn(x, n, y, first, end);
}

// acc[i] = the sum over r < rows of p[r * stride + i] (of its square with `squares`) in double,
// for i < n: the column sums of a reduction over a middle axis (LayerNorm2d's mean over the
// channels), vectorised per instruction set (the conversions to double halve the lanes).
#define REPRISE_COLUMN_ARGS \
  const float *p, int64_t rows, int64_t stride, int64_t n, bool squares, double *acc
template <bool kSquares>
__attribute__((always_inline)) inline void ColumnSumsOf(REPRISE_COLUMN_ARGS) {
  // 32 columns at a time summed down all the rows in registers, then the rest column by column.
  constexpr int64_t kBlock = 32;
  int64_t i0 = 0;
  for (; i0 + kBlock <= n; i0 += kBlock) {
    double sums[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = p + r * stride + i0;
      for (int64_t i = 0; i < kBlock; ++i) {
        const double v = row[i];
        sums[i] += kSquares ? v * v : v;
      }
    }
    std::copy(sums, sums + kBlock, acc + i0);
  }
  std::fill(acc + i0, acc + n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * stride;
    for (int64_t i = i0; i < n; ++i) {
      const double v = row[i];
      acc[i] += kSquares ? v * v : v;
    }
  }
  (void)squares;
}
__attribute__((always_inline)) inline void ColumnSumsBody(REPRISE_COLUMN_ARGS) {
  if (squares) {
    ColumnSumsOf<true>(p, rows, stride, n, squares, acc);
  } else {
    ColumnSumsOf<false>(p, rows, stride, n, squares, acc);
  }
}
__attribute__((target("avx512f"))) void ColumnSumsAvx512(REPRISE_COLUMN_ARGS) {
  ColumnSumsBody(p, rows, stride, n, squares, acc);
}
__attribute__((target("avx2,fma"))) void ColumnSumsAvx2(REPRISE_COLUMN_ARGS) {
  ColumnSumsBody(p, rows, stride, n, squares, acc);
}
void ColumnSumsBaseline(REPRISE_COLUMN_ARGS) { ColumnSumsBody(p, rows, stride, n, squares, acc); }
void ColumnSums(REPRISE_COLUMN_ARGS) {
  static const auto fn = PickForThisCpu(&ColumnSumsAvx512, &ColumnSumsAvx2, &ColumnSumsBaseline);
  fn(p, rows, stride, n, squares, acc);
}
#undef REPRISE_COLUMN_ARGS

// The copy for this CPU, picked on first use.
template <bool kMax>
float RowExtreme(const float* p, int64_t n) {
  static const auto fn =
      PickForThisCpu(&RowExtremeAvx512<kMax>, &RowExtremeAvx2<kMax>, &RowExtremeBaseline<kMax>);
  return fn(p, n);
}

// The sum of e^(p[k] - shift) over p[0, n), shift at least every p[k] (each power at most 1;
// a NaN value makes the sum NaN), in float with four vectors of V (the copy's register width)
// in flight: for up to a few thousand values (LogSumExpOfRow sums longer rows by blocks).
template <typename V>
__attribute__((always_inline)) inline float RowSumExpBody(const float* p, int64_t n, float shift) {
  using I = IntsFor<V>;
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V a[4] = {};
  int64_t k = 0;
  for (; k + 4 * kLanes <= n; k += 4 * kLanes) {
    for (int j = 0; j < 4; ++j) {
      V v;
      LoadFloats(p + k + j * kLanes, &v);
      v -= shift;
      ExpNonPositive<V, I>(v, &v);
      a[j] += v;
    }
  }
  for (; k + kLanes <= n; k += kLanes) {
    V v;
    LoadFloats(p + k, &v);
    v -= shift;
    ExpNonPositive<V, I>(v, &v);
    a[0] += v;
  }
  a[0] = (a[0] + a[1]) + (a[2] + a[3]);
  float total = 0;
  for (int64_t j = 0; j < kLanes; ++j) total += a[0][j];
  for (; k < n; ++k) {
    float v = p[k] - shift;
    ExpNonPositive<float, int32_t>(v, &v);
    total += v;
  }
  return total;
}
__attribute__((target("avx512f"))) float RowSumExpAvx512(const float* p, int64_t n, float shift) {
  return RowSumExpBody<Floats16>(p, n, shift);
}
__attribute__((target("avx2,fma"))) float RowSumExpAvx2(const float* p, int64_t n, float shift) {
  return RowSumExpBody<Floats8>(p, n, shift);
}
float RowSumExpBaseline(const float* p, int64_t n, float shift) {
  return RowSumExpBody<Floats4>(p, n, shift);
}

// log(sum of e^x) over `count` values `stride` apart, in double without a shift: the form for
// a maximum that is an infinity (every value -inf gives -inf; a +inf gives +inf; NaN stays NaN).
double PlainLogSumExp(const float* p, int64_t count, int64_t stride) {
  double sum = 0;
  for (int64_t k = 0; k < count; ++k) sum += std::exp(static_cast<double>(p[k * stride]));
  return std::log(sum);
}

// log(sum of e^p[k]) over p[0, n), n > 0, as m + log(sum of e^(p[k] - m)) with m the row's
// maximum, so that no power overflows (values far above 88, float's largest exponent, are
// fine); the sum in double over blocks of 2048.
float LogSumExpOfRow(const float* p, int64_t n) {
  static const auto sum_exp = PickForThisCpu(&RowSumExpAvx512, &RowSumExpAvx2, &RowSumExpBaseline);
  const float m = RowExtreme<true>(p, n);
  if (!std::isfinite(m)) return static_cast<float>(PlainLogSumExp(p, n, 1));
  constexpr int64_t kBlock = 2048;
  double total = 0;
  for (int64_t at = 0; at < n; at += kBlock) total += sum_exp(p + at, std::min(kBlock, n - at), m);
  return static_cast<float>(static_cast<double>(m) + std::log(total));
}

// The input as [outer, reduced, inner] when the reduced axes (size-1 axes aside) are one run of
// adjacent axes: `outer` and `inner` the products of the kept axes before and after it.
struct ReducedBlock {
  int64_t outer = 1;
  int64_t reduced = 1;
  int64_t inner = 1;
};

std::optional<ReducedBlock> AsReducedBlock(const Shape& shape, const std::vector<bool>& reduced) {
  ReducedBlock block;
  int phase = 0;  // 0: kept axes before the run, 1: in the run, 2: kept axes after it
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (reduced[i]) {
      if (phase == 2) return std::nullopt;
      phase = 1;
      block.reduced *= shape[i];
    } else if (phase == 0) {
      block.outer *= shape[i];
    } else {
      phase = 2;
      block.inner *= shape[i];
    }
  }
  return block;
}

// Float32 sums, means, sums of squares and their square roots, maxima, minima and log-sum-exps
// over one run of axes, split over the intra-op threads by output: rows of contiguous values
// (the run at the end) in vector lanes (sums in double per block of lanes: LongRowSum,
// LogSumExpOfRow), else whole rows of `inner` values at a time, in double for the sums. Null
// for any other reduction.
template <Reduce kOp>
FunctionKernel::RunFn FastFloatReduce(const ReducedBlock& b, int threads) {
  constexpr bool kSums = kOp == Reduce::kSum || kOp == Reduce::kMean || kOp == Reduce::kSumSquare ||
                         kOp == Reduce::kL2;
  constexpr bool kExtreme = kOp == Reduce::kMax || kOp == Reduce::kMin;
  constexpr bool kLse = kOp == Reduce::kLogSumExp;
  if constexpr (!kSums && !kExtreme && !kLse) {
    return nullptr;
  } else {
    constexpr bool kSquares = kOp == Reduce::kSumSquare || kOp == Reduce::kL2;
    return [b, threads](const KernelArgs& args) {
      const float* x = static_cast<const float*>(args.inputs[0]);
      float* y = static_cast<float*>(args.outputs[0]);
      const int64_t rows = b.outer * b.inner;
      ParallelFor(rows, threads, static_cast<double>(b.reduced), [&](int64_t first, int64_t end) {
        if constexpr (kExtreme) {
          if (b.inner == 1) {
            RowsExtreme<kOp == Reduce::kMax>(x, b.reduced, y, first, end);
            return;
          }
        }
        if (b.inner == 1) {
          for (int64_t o = first; o < end; ++o) {
            const float* p = x + o * b.reduced;
            if constexpr (kSums) {
              y[o] = static_cast<float>(
                  Finish<kOp, double>(LongRowSum(p, b.reduced, 0.0f, kSquares), b.reduced));
            } else {
              y[o] = LogSumExpOfRow(p, b.reduced);
            }
          }
          return;
        }
        // Outputs [first, end) as (o, i) pairs, up to kColumns of one row of `inner` at a time
        // (the sums' accumulators stay on the stack: nothing allocates per run).
        constexpr int64_t kColumns = 256;
        double acc[kColumns];
        float shift[kColumns];
        for (int64_t at = first; at < end;) {
          const int64_t o = at / b.inner;
          const int64_t i0 = at % b.inner;
          const int64_t n = std::min({end - at, b.inner - i0, kColumns});
          const float* p = x + o * b.reduced * b.inner + i0;
          float* q = y + at;
          if constexpr (kSums) {
            ColumnSums(p, b.reduced, b.inner, n, kSquares, acc);
            for (int64_t i = 0; i < n; ++i) {
              q[i] = static_cast<float>(Finish<kOp, double>(acc[i], b.reduced));
            }
          } else if constexpr (kLse) {
            // Each column's maximum, then the sum of e^(x - maximum) (LogSumExpOfRow's form).
            std::fill(shift, shift + n, -INFINITY);
            for (int64_t r = 0; r < b.reduced; ++r) {
              const float* row = p + r * b.inner;
              for (int64_t i = 0; i < n; ++i) TakeExtreme<true>(row[i], &shift[i]);
            }
            std::fill(acc, acc + n, 0.0);
            for (int64_t r = 0; r < b.reduced; ++r) {
              const float* row = p + r * b.inner;
              for (int64_t i = 0; i < n; ++i) {
                float e = row[i] - shift[i];
                ExpNonPositive<float, int32_t>(e, &e);
                acc[i] += e;
              }
            }
            for (int64_t i = 0; i < n; ++i) {
              q[i] = std::isfinite(shift[i])
                         ? static_cast<float>(static_cast<double>(shift[i]) + std::log(acc[i]))
                         : static_cast<float>(PlainLogSumExp(p + i, b.reduced, b.inner));
            }
          } else {
            std::copy(p, p + n, q);
            for (int64_t r = 1; r < b.reduced; ++r) {
              const float* row = p + r * b.inner;
              for (int64_t i = 0; i < n; ++i) q[i] = Step<kOp, float>(q[i], row[i]);
            }
          }
          at += n;
        }
      });
      return absl::OkStatus();
    };
  }
}

template <Reduce kOp>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareReduce(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 2));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(int64_t keepdims, attrs.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t noop_empty, attrs.GetInt("noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (HasInput(context, 1)) {
    ASSIGN_OR_RETURN(axes, ReadInts(context, 1, "axes"));
  } else {
    ASSIGN_OR_RETURN(axes, attrs.GetInts("axes", {}));
  }
  std::vector<bool> reduced(rank, axes.empty() && noop_empty == 0);
  for (int64_t axis : axes) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(context, axis, rank));
    reduced[a] = true;
  }
  const std::vector<int64_t> strides = ContiguousStrides(in.shape);
  Shape out, kept_dims, red_dims;
  std::vector<int64_t> kept_strides, red_strides;
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[i]) {
      red_dims.push_back(in.shape[i]);
      red_strides.push_back(strides[i]);
      if (keepdims != 0) out.push_back(1);
    } else {
      kept_dims.push_back(in.shape[i]);
      kept_strides.push_back(strides[i]);
      out.push_back(in.shape[i]);
    }
  }
  const std::optional<ReducedBlock> block = AsReducedBlock(in.shape, reduced);
  if (in.dtype == DataType::kFloat32 && block.has_value() && block->reduced > 0) {
    if (FunctionKernel::RunFn fast = FastFloatReduce<kOp>(*block, context.intra_op_threads)) {
      return MakeKernel(context, {Desc(in.dtype, out)}, std::move(fast));
    }
  }
  const BroadcastPlan kept = MakeStridedPlan(kept_dims, {kept_strides});
  const BroadcastPlan red = MakeStridedPlan(red_dims, {red_strides});
  FunctionKernel::RunFn run;
  const bool ok = DispatchArithmetic(in.dtype, [&]<typename T>() {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    run = [kept, red](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      const int64_t sk = kept.strides[0].back();
      const int64_t sr = red.strides[0].back();
      ForEachRow(kept, [&](int64_t out_at, const int64_t* koffs, int64_t kn) {
        for (int64_t j = 0; j < kn; ++j) {
          const T* base = x + koffs[0] + j * sk;
          // Floating-point log-sum-exps shift by the maximum (LogSumExpOfRow's form) unless it
          // is an infinity.
          Acc shift = 0;
          if constexpr (kOp == Reduce::kLogSumExp && std::is_floating_point_v<T>) {
            Acc m = -std::numeric_limits<Acc>::infinity();
            ForEachRow(red, [&](int64_t, const int64_t* roffs, int64_t rn) {
              const T* p = base + roffs[0];
              for (int64_t r = 0; r < rn; ++r) m = Step<Reduce::kMax, Acc>(m, p[r * sr]);
            });
            if (std::isfinite(m)) shift = m;
          }
          Acc acc = Init<kOp, Acc>();
          ForEachRow(red, [&](int64_t, const int64_t* roffs, int64_t rn) {
            const T* p = base + roffs[0];
            for (int64_t r = 0; r < rn; ++r) {
              acc = Step<kOp, Acc>(acc, static_cast<Acc>(p[r * sr]) - shift);
            }
          });
          y[out_at + j] = static_cast<T>(Finish<kOp, Acc>(acc, red.count) + shift);
        }
      });
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  return MakeKernel(context, {Desc(in.dtype, out)}, std::move(run));
}

// Columns per item of ArgMax / ArgMin.
constexpr int64_t kArgChunk = 256;

// ArgMax (kMax) or ArgMin of one contiguous row of n > 0 values, as a scan that keeps the index
// of the best so far and takes a later value only when it is better (greater, or also equal
// when `last`): 0 when p[0] is NaN (nothing is better than it), else the first (or last) index
// of the best of the values that are not NaN. Floats in two SSE passes, the best value over four
// registers of lanes (maxps(v, m) is v > m ? v : m, so a NaN never replaces a lane's value), then
// its first or last position (a NaN p[0] stays the best and equals nothing: 0); the scan compared
// each value with the best so far one at a time (1.25 ms for 64 rows of 19200 floats). Other types
// scan.
template <bool kMax, typename T>
int64_t ArgOfRow(const T* p, int64_t n, bool last) {
  if constexpr (std::is_same_v<T, float>) {
    const auto better = [](__m128 v, __m128 m) {
      return kMax ? _mm_max_ps(v, m) : _mm_min_ps(v, m);
    };
    __m128 m[4];
    for (__m128& r : m) r = _mm_set1_ps(p[0]);
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
      for (int r = 0; r < 4; ++r) m[r] = better(_mm_loadu_ps(p + k + 4 * r), m[r]);
    }
    for (; k + 4 <= n; k += 4) m[0] = better(_mm_loadu_ps(p + k), m[0]);
    float lanes[16];
    for (int r = 0; r < 4; ++r) _mm_storeu_ps(lanes + 4 * r, m[r]);
    float value = p[0];
    for (float v : lanes) value = (kMax ? v > value : v < value) ? v : value;
    for (; k < n; ++k) value = (kMax ? p[k] > value : p[k] < value) ? p[k] : value;
    const __m128 target = _mm_set1_ps(value);
    if (last) {
      int64_t i = n;
      for (; i >= 4; i -= 4) {
        if (_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(p + i - 4), target)) != 0) break;
      }
      while (i-- > 0) {
        if (p[i] == value) return i;
      }
      return 0;
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      if (_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(p + i), target)) != 0) break;
    }
    for (; i < n; ++i) {
      if (p[i] == value) return i;
    }
    return 0;
  } else {
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      const T v = p[k], b = p[best];
      if (kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b)) best = k;
    }
    return best;
  }
}

// ArgMax (kMax) or ArgMin along the middle axis of [outer, dim, inner] (inner > 1) into y
// [outer, inner]: kArgChunk columns at a time, row by row along the axis, the best values and
// their indices so far in two buffers updated without a branch (vector code, with an Index as
// wide as T), the indices then copied out; items of (outer index, chunk) over the threads.
// Column by column, ArgMax over the 64 channels of [1, 64, 120, 160] took 1.38 ms (strided
// reads). A NaN is never better than the best so far, nor is anything better than a NaN best
// (the comparisons are false): the scan's indices.
template <bool kMax, typename T, typename Index>
void ArgOfColumns(const T* x, int64_t* y, int64_t outer, int64_t dim, int64_t inner, bool last,
                  int threads) {
  const int64_t chunks = (inner + kArgChunk - 1) / kArgChunk;
  ParallelFor(
      outer * chunks, threads, static_cast<double>(dim * std::min(inner, kArgChunk)),
      [&](int64_t begin, int64_t end) {
        T best[kArgChunk];
        Index index[kArgChunk];
        for (int64_t item = begin; item < end; ++item) {
          const int64_t o = item / chunks, i0 = item % chunks * kArgChunk;
          const int64_t n = std::min(kArgChunk, inner - i0);
          const T* p = x + o * dim * inner + i0;
          for (int64_t i = 0; i < n; ++i) {
            best[i] = p[i];
            index[i] = 0;
          }
          for (int64_t k = 1; k < dim; ++k) {
            const T* row = p + k * inner;
            const Index at = static_cast<Index>(k);
            for (int64_t i = 0; i < n; ++i) {
              const T v = row[i], b = best[i];
              const bool better = kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
              best[i] = better ? v : b;
              index[i] = better ? at : index[i];
            }
          }
          std::copy(index, index + n, y + o * inner + i0);
        }
      },
      1);
}

template <bool kMax>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareArg(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 1, 1));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const Attributes& attrs = AttrsOf(context);
  ASSIGN_OR_RETURN(int64_t axis_attr, attrs.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t keepdims, attrs.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t last, attrs.GetInt("select_last_index", 0));
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_attr, rank));
  const int64_t dim = in.shape[axis];
  if (dim == 0)
    return InvalidArgument(context, "axis ", axis, " of ", runtime::ShapeToString(in.shape),
                           " is empty");
  Shape out;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) outer *= in.shape[i];
    if (i > axis) inner *= in.shape[i];
    if (i != axis)
      out.push_back(in.shape[i]);
    else if (keepdims != 0)
      out.push_back(1);
  }
  FunctionKernel::RunFn run;
  const bool ok = DispatchArithmetic(in.dtype, [&]<typename T>() {
    run = [outer, inner, dim, last, threads = context.intra_op_threads](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      int64_t* y = static_cast<int64_t*>(args.outputs[0]);
      if (inner == 1) {
        ParallelFor(outer, threads, static_cast<double>(dim), [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) y[o] = ArgOfRow<kMax>(x + o * dim, dim, last != 0);
        });
      } else if (sizeof(T) == 4 && dim <= std::numeric_limits<int32_t>::max()) {
        // Indices as wide as the elements where they fit (so that the selects vectorise).
        ArgOfColumns<kMax, T, int32_t>(x, y, outer, dim, inner, last != 0, threads);
      } else {
        ArgOfColumns<kMax, T, int64_t>(x, y, outer, dim, inner, last != 0, threads);
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  return MakeKernel(context, {Desc(DataType::kInt64, out)}, std::move(run));
}

absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareCumSum(const PrepareContext& context) {
  RETURN_IF_ERROR(ExpectInputCount(context, 2, 2));
  const TensorDesc& in = context.inputs[0];
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, ReadInts(context, 1, "axis"));
  if (axis_value.size() != 1) {
    return InvalidArgument(context, "axis must hold one value, got ",
                           runtime::ShapeToString(axis_value));
  }
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, axis_value[0], rank));
  ASSIGN_OR_RETURN(int64_t exclusive, AttrsOf(context).GetInt("exclusive", 0));
  ASSIGN_OR_RETURN(int64_t reverse, AttrsOf(context).GetInt("reverse", 0));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= in.shape[i];
  const int64_t dim = in.shape[axis];
  FunctionKernel::RunFn run;
  const bool ok = DispatchArithmetic(in.dtype, [&]<typename T>() {
    run = [=](const KernelArgs& args) {
      const T* x = static_cast<const T*>(args.inputs[0]);
      T* y = static_cast<T*>(args.outputs[0]);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * dim * inner + i;
          T acc{0};
          for (int64_t step = 0; step < dim; ++step) {
            const int64_t k = reverse != 0 ? dim - 1 - step : step;
            const T v = x[base + k * inner];
            if (exclusive != 0) {
              y[base + k * inner] = acc;
              acc += v;
            } else {
              acc += v;
              y[base + k * inner] = acc;
            }
          }
        }
      }
      return absl::OkStatus();
    };
  });
  if (!ok) {
    return ExpectType(context, 0,
                      {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64});
  }
  return MakeKernel(context, {Desc(in.dtype, in.shape)}, std::move(run));
}

}  // namespace

absl::Status RegisterReduceKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("ReduceSum", &PrepareReduce<Reduce::kSum>));
  RETURN_IF_ERROR(registry->Register("ReduceMean", &PrepareReduce<Reduce::kMean>));
  RETURN_IF_ERROR(registry->Register("ReduceMax", &PrepareReduce<Reduce::kMax>));
  RETURN_IF_ERROR(registry->Register("ReduceMin", &PrepareReduce<Reduce::kMin>));
  RETURN_IF_ERROR(registry->Register("ReduceProd", &PrepareReduce<Reduce::kProd>));
  RETURN_IF_ERROR(registry->Register("ReduceL1", &PrepareReduce<Reduce::kL1>));
  RETURN_IF_ERROR(registry->Register("ReduceL2", &PrepareReduce<Reduce::kL2>));
  RETURN_IF_ERROR(registry->Register("ReduceSumSquare", &PrepareReduce<Reduce::kSumSquare>));
  RETURN_IF_ERROR(registry->Register("ReduceLogSum", &PrepareReduce<Reduce::kLogSum>));
  RETURN_IF_ERROR(registry->Register("ReduceLogSumExp", &PrepareReduce<Reduce::kLogSumExp>));
  RETURN_IF_ERROR(registry->Register("ArgMax", &PrepareArg<true>));
  RETURN_IF_ERROR(registry->Register("ArgMin", &PrepareArg<false>));
  RETURN_IF_ERROR(registry->Register("CumSum", &PrepareCumSum));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
