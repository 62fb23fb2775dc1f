// The small product kernel (small_gemm.h): blocks of up to 4 rows by 16 or 32 columns whose
// sums stay in registers for the whole k loop, one broadcast multiply-add per row and vector.
#include "kernels/cpu/small_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"

namespace reprise::kernels::cpu {
namespace {

// `t`'s activation and residual applied to v, the sum at row i and column j (float or a vector
// of consecutive columns).
template <typename T>
__attribute__((always_inline)) inline void FinishSums(const SmallTail& t, int64_t i, int64_t j,
                                                      T* v) {
  if (t.act == SmallTail::Act::kRelu) {
    *v = *v > 0.0f ? *v : T{} + 0.0f;
  } else if (t.act == SmallTail::Act::kClip) {
    *v = *v < t.lo ? T{} + t.lo : *v;
    *v = *v > t.hi ? T{} + t.hi : *v;
  }
  if (t.residual != nullptr) {
    if constexpr (std::is_same_v<T, float>) {
      *v += t.residual[i * t.ldr + j];
    } else {
      T r;
      LoadFloats(t.residual + i * t.ldr + j, &r);
      *v += r;
    }
  }
}

// Where the small kernel reads B: row-major with rows `ldb` apart, or (`panels`) in panels of
// kSmallPanel columns, each its k rows one after another (PackSmallGemmPanels; the last panel
// zero-padded). Column `col` then starts at base(col) and its next row is step(col) further on,
// so a block of columns reads each panel front to back, where row-major rows of 2 or 4 KiB
// (n = 512 or 1024) map to the same few cache sets and every row read missed (1 x 256 by
// 256 x 1024 took 35-73 us on the AVX-512 VM, 2.5-5x the 14 us of 256 x 1000).
struct SmallB {
  const float* b;
  int64_t ldb;
  int64_t k;
  bool panels;
  const float* base(int64_t col) const {
    return panels ? b + (col / kSmallPanel) * k * kSmallPanel + col % kSmallPanel : b + col;
  }
  int64_t step() const { return panels ? kSmallPanel : ldb; }
  // B from column `col` on (a multiple of kSmallPanel).
  SmallB From(int64_t col) const {
    SmallB from = *this;
    from.b = base(col);
    return from;
  }
};

// y[i, i + R) x [j, j + C * lanes) = tail(a * b) with the R x C vectors of sums in registers
// for the whole k loop: one broadcast multiply-add per row and vector for each row of b.
template <typename V, int R, int C>
__attribute__((always_inline)) inline void SmallGemmBlock(int64_t i, int64_t j, int64_t k,
                                                          const float* __restrict a, int64_t lda,
                                                          const SmallB& b, float* __restrict y,
                                                          int64_t ldy, const SmallTail& t) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  V acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      if (t.accumulate) {
        LoadFloats(y + (i + r) * ldy + j + c * kLanes, &acc[r][c]);
      } else if (t.bias != nullptr) {
        LoadFloats(t.bias + j + c * kLanes, &acc[r][c]);
      } else {
        acc[r][c] = V{};
      }
    }
  }
  const float* __restrict bc[C];
  for (int c = 0; c < C; ++c) bc[c] = b.base(j + c * kLanes);
  const int64_t step = b.step();
  for (int64_t kk = 0; kk < k; ++kk) {
    V bv[C];
    for (int c = 0; c < C; ++c) LoadFloats(bc[c] + kk * step, &bv[c]);
    for (int r = 0; r < R; ++r) {
      const float av = a[(i + r) * lda + kk];
      for (int c = 0; c < C; ++c) acc[r][c] += av * bv[c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      FinishSums(t, i + r, j + c * kLanes, &acc[r][c]);
      StoreFloats(y + (i + r) * ldy + j + c * kLanes, acc[r][c]);
    }
  }
}

// Rows [i, i + R) of the product, all n columns: blocks of 16 columns (32 for one or two rows,
// whose fewer sums would otherwise wait on the multiply-add's latency), then one vector, then
// the last columns one by one.
template <typename V, int R>
__attribute__((always_inline)) inline void SmallGemmRowBlock(int64_t i, int64_t n, int64_t k,
                                                             const float* __restrict a, int64_t lda,
                                                             const SmallB& b, float* __restrict y,
                                                             int64_t ldy, const SmallTail& t) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
  constexpr int kVecs = (R <= 2 ? 32 : 16) / kLanes;
  int64_t j = 0;
  for (; j + kVecs * kLanes <= n; j += kVecs * kLanes) {
    SmallGemmBlock<V, R, kVecs>(i, j, k, a, lda, b, y, ldy, t);
  }
  for (; j + kLanes <= n; j += kLanes) SmallGemmBlock<V, R, 1>(i, j, k, a, lda, b, y, ldy, t);
  for (; j < n; ++j) {
    const float* bj = b.base(j);
    const int64_t step = b.step();
    for (int r = 0; r < R; ++r) {
      float sum = t.accumulate ? y[(i + r) * ldy + j] : t.bias != nullptr ? t.bias[j] : 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) sum += a[(i + r) * lda + kk] * bj[kk * step];
      FinishSums(t, i + r, j, &sum);
      y[(i + r) * ldy + j] = sum;
    }
  }
}

// y[m,n] = tail(a[m,k] * b[k,n]) (A and Y row-major with leading dimensions lda and ldy, B as
// `b` says) in blocks of 4 rows, the last 1 to 3 rows as one block. Inlined into one copy per
// instruction set below, with V that set's register width (vector_math.h).
template <typename V>
__attribute__((always_inline)) inline void SmallGemmBody(int64_t m, int64_t n, int64_t k,
                                                         const float* __restrict a, int64_t lda,
                                                         const SmallB& b, float* __restrict y,
                                                         int64_t ldy, const SmallTail& t) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) SmallGemmRowBlock<V, 4>(i, n, k, a, lda, b, y, ldy, t);
  switch (m - i) {
    case 3:
      SmallGemmRowBlock<V, 3>(i, n, k, a, lda, b, y, ldy, t);
      break;
    case 2:
      SmallGemmRowBlock<V, 2>(i, n, k, a, lda, b, y, ldy, t);
      break;
    case 1:
      SmallGemmRowBlock<V, 1>(i, n, k, a, lda, b, y, ldy, t);
      break;
    default:
      break;
  }
}

#define REPRISE_SMALL_GEMM_ARGS                                                            \
  int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const SmallB &b, float *y, \
      int64_t ldy, const SmallTail &t
__attribute__((target("avx512f"))) void SmallGemmAvx512(REPRISE_SMALL_GEMM_ARGS) {
  SmallGemmBody<Floats16>(m, n, k, a, lda, b, y, ldy, t);
}
__attribute__((target("avx2,fma"))) void SmallGemmAvx2(REPRISE_SMALL_GEMM_ARGS) {
  SmallGemmBody<Floats8>(m, n, k, a, lda, b, y, ldy, t);
}
void SmallGemmBaseline(REPRISE_SMALL_GEMM_ARGS) {
  SmallGemmBody<Floats4>(m, n, k, a, lda, b, y, ldy, t);
}
#undef REPRISE_SMALL_GEMM_ARGS

// The copy for this CPU, picked on first use.
auto PickedSmallGemm() {
  static const auto fn = PickForThisCpu(&SmallGemmAvx512, &SmallGemmAvx2, &SmallGemmBaseline);
  return fn;
}

// Columns per range of a split product: a block of 32 columns (two panels) stays whole.
constexpr int64_t kSplitColumns = 32;

// The small product split by ranges of columns over the calling stream's threads. Every column's
// sums are the same whichever range computes them, so the result does not depend on the split.
void SplitSmallGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const SmallB& b,
                    float* y, int64_t ldy, const SmallTail& t) {
  const auto gemm = PickedSmallGemm();
  const int threads = omp_get_max_threads();
  // Cost of a range of 32 columns in ns: reading its k x 32 floats of B once per block of 4
  // rows (about 1.5 ns per row of B), or 0.018 ns per multiply-add, whichever is more
  // (BM_FewRowsProduct at one thread: 1 x 256 by 256 x 1024 in 12 us, 16 x 128 by 128 x 128
  // in 4.6 us).
  const double row_blocks = static_cast<double>((m + 3) / 4);
  const double cost = std::max(1.5 * row_blocks, 0.018 * static_cast<double>(m * kSplitColumns)) *
                      static_cast<double>(k);
  const int64_t ranges = (n + kSplitColumns - 1) / kSplitColumns;
  // Two threads from 8 us of work, half of ParallelFor's default: on two threads,
  // BM_FewRowsProduct's 1 x 256 by 256 x 1024 (12 us) takes 7.3-7.6 us, while those of 5 us
  // (1 x 256 by 256 x 512, 1 x 128 by 128 x 1024, 4 x 64 by 64 x 1024) gain nothing.
  constexpr double kMinWork = kMinParallelWork / 2;
  if (threads <= 1 || ParallelTeam(ranges, threads, cost, /*grain=*/1, kMinWork) <= 1) {
    gemm(m, n, k, a, lda, b, y, ldy, t);  // most small products: no range bookkeeping
    return;
  }
  ParallelFor(
      ranges, threads, cost,
      [&](int64_t r0, int64_t r1) {
        const int64_t j0 = r0 * kSplitColumns, j1 = std::min(n, r1 * kSplitColumns);
        SmallTail part = t;
        if (part.bias != nullptr) part.bias += j0;
        if (part.residual != nullptr) part.residual += j0;
        gemm(m, j1 - j0, k, a, lda, b.From(j0), y + j0, ldy, part);
      },
      /*grain=*/1, kMinWork);
}

}  // namespace

void SmallGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* y, int64_t ldy, const SmallTail& t) {
  SplitSmallGemm(m, n, k, a, lda, SmallB{b, ldb, k, false}, y, ldy, t);
}

void SmallGemmOnPanels(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                       const float* panels, float* y, int64_t ldy, const SmallTail& t) {
  SplitSmallGemm(m, n, k, a, lda, SmallB{panels, 0, k, true}, y, ldy, t);
}

void PackColumnPanels(int64_t k, int64_t n, bool trans_b, const float* b, int64_t ldb, float* out) {
  const int64_t count = (n + kSmallPanel - 1) / kSmallPanel;
  for (int64_t p = 0; p < count; ++p) {
    float* panel = out + p * k * kSmallPanel;
    const int64_t j0 = p * kSmallPanel, cols = std::min(kSmallPanel, n - j0);
    if (cols < kSmallPanel) std::fill(panel, panel + k * kSmallPanel, 0.0f);
    // Each column of a panel is a row of a transposed B (read along it); a plain B gives a
    // panel's columns of each row at once.
    if (trans_b) {
      for (int64_t c = 0; c < cols; ++c) {
        const float* row = b + (j0 + c) * ldb;
        for (int64_t kk = 0; kk < k; ++kk) panel[kk * kSmallPanel + c] = row[kk];
      }
    } else {
      const size_t bytes = static_cast<size_t>(cols) * sizeof(float);
      for (int64_t kk = 0; kk < k; ++kk)
        std::memcpy(panel + kk * kSmallPanel, b + kk * ldb + j0, bytes);
    }
  }
}

std::vector<float> PackSmallGemmPanels(int64_t k, int64_t n, bool trans_b, const float* b,
                                       int64_t ldb, float alpha) {
  const int64_t count = (n + kSmallPanel - 1) / kSmallPanel;
  std::vector<float> out(static_cast<size_t>(count * k * kSmallPanel));
  PackColumnPanels(k, n, trans_b, b, ldb, out.data());
  if (alpha != 1.0f) {
    for (float& v : out) v *= alpha;
  }
  return out;
}

// True when the small kernel beats sgemm: up to 16 rows (on the bench machine at one thread,
// the zoo's 48-layer width-32 MLP at batch 8 replays in ~40 us through sgemm).
bool UseSmallGemm(int64_t m, int64_t n, int64_t k) {
  return m > 0 && m <= kSmallGemmRows && n * k > 0 && m * n * k <= kSmallGemmMacs;
}

}  // namespace reprise::kernels::cpu
