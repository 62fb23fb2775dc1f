// The small product kernel of Gemm and MatMul (gemm.cc): y = tail(a * b) for products of a few
// rows, the sums of a block of rows and columns in registers for the whole k loop, B row-major
// or in panels of kSmallPanel columns (read front to back). One copy per instruction set,
// picked on first use.
#ifndef REPRISE_KERNELS_CPU_SMALL_GEMM_H_
#define REPRISE_KERNELS_CPU_SMALL_GEMM_H_

#include <cmath>
#include <cstdint>
#include <vector>

namespace reprise::kernels::cpu {

// Products of at most kSmallGemmRows rows and kSmallGemmMacs multiply-adds skip oneDNN's sgemm,
// whose fixed cost per call (about a microsecond) exceeds the arithmetic.
inline constexpr int64_t kSmallGemmMacs = 64 * 64 * 64;
inline constexpr int64_t kSmallGemmRows = 16;

// What the small kernel does around its sums: each starts from y's value (`accumulate`), from
// the bias row's value for its column (`bias`, n floats) or from zero; then takes Relu or the
// clamp to [lo, hi] (`act`: NaN stays NaN in the clamp, becomes 0 in Relu, as Activate does)
// and adds the residual's element (rows `ldr` apart), before it is stored once.
struct SmallTail {
  enum class Act { kNone, kRelu, kClip };
  bool accumulate = false;
  const float* bias = nullptr;
  Act act = Act::kNone;
  float lo = -INFINITY, hi = INFINITY;
  const float* residual = nullptr;
  int64_t ldr = 0;
};

/// True when the small kernel beats sgemm (kSmallGemmRows, kSmallGemmMacs).
bool UseSmallGemm(int64_t m, int64_t n, int64_t k);

/// y[m, n] (rows ldy apart) = tail(a[m, k] (rows lda apart) * b[k, n]), B row-major with rows
/// ldb apart. On the calling thread's OpenMP threads (omp_get_max_threads()): a product of one
/// row by about 175,000 weights or more is split by ranges of columns, with the same bits.
void SmallGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* y, int64_t ldy, const SmallTail& t);

/// The same with B in panels (PackSmallGemmPanels).
void SmallGemmOnPanels(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                       const float* panels, float* y, int64_t ldy, const SmallTail& t);

/// Columns per panel of B.
inline constexpr int64_t kSmallPanel = 16;

/// B [k, n] (row-major with rows ldb apart, or with trans_b stored [n, k]) in panels of
/// kSmallPanel columns, each its k rows one after another, zeros past n: `out` holds
/// ceil(n / kSmallPanel) x k x kSmallPanel floats. The small kernel's panels and the packed
/// products' (packed_product.cc).
void PackColumnPanels(int64_t k, int64_t n, bool trans_b, const float* b, int64_t ldb, float* out);

/// B in a new vector of panels, each value times `alpha`, for the small kernel. For products
/// UseSmallGemm takes (n k is at most kSmallGemmMacs, so the sizes cannot overflow).
std::vector<float> PackSmallGemmPanels(int64_t k, int64_t n, bool trans_b, const float* b,
                                       int64_t ldb, float alpha = 1.0f);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_SMALL_GEMM_H_
