// PackedProduct (gemm.h): products by constant weights on oneDNN's matmul primitive with the
// weights packed once, or, for 2 to 16 rows by weights oneDNN keeps plain, our AVX2 kernel on
// the weights packed in panels of 16 columns (one or two rows by large weights: our row kernel
// on the same panels); sgemm on a padded row-major copy from 32 rows.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnnl.h"
#include "dnnl.hpp"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/onednn_util.h"
#include "kernels/cpu/small_gemm.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

bool PreferPackedProduct(int64_t m, int64_t n, int64_t k, bool trans_b) {
  return trans_b || (m <= kPackedProductMaxRows && k * n >= (int64_t{1} << 18));
}

namespace {

// From this many rows, sgemm on a plain B beats oneDNN's matmul on it (gemm.h).
constexpr int64_t kSgemmRowsForPlainB = 32;

// Products of kPanelMinRows to kPanelMaxRows rows by a B that oneDNN keeps plain run on B packed
// in panels of kPanelWidth columns (gemm.h). One row stays on oneDNN (its matrix-vector path
// was faster: 1x768x3072 0.18 ms against 0.25), and from about 31 rows sgemm is as fast.
constexpr int64_t kPanelMinRows = 2;
constexpr int64_t kPanelMaxRows = 16;
constexpr int64_t kPanelWidth = 16;
static_assert(kPanelWidth == kSmallPanel, "PackColumnPanels packs both kernels' panels");

// One or two rows by at least kRowPanelMinWeights weights run on our row kernel (RowsPanelBody)
// on B in the same panels, on every CPU with AVX2: inside a model such weights come from memory
// or L3, not the inner caches, and the kernel reads them as one contiguous stream per panel where
// oneDNN's matmul reads blocks (AVX-512 VM, one thread, oneDNN's brgemm against the row kernel,
// medians of runs interleaved: 1x9216x4096 11.3 -> 10.3 ms, 1x4096x4096 4.6 -> 3.1, 1x2048x1024
// 0.45 -> 0.27, 1x768x3072 0.57 -> 0.33; BM_FewRowsProduct, three runs each: 2x9216x4096 11.5-16.9
// -> 8.6-9.2 ms, and on AVX2 against PanelProductAvx2 11.8-12.5 -> 8.4-9.4). Three or four rows
// gained nothing (3x9216x4096 9.5-11.0 -> 9.9-11.5 ms, 4x 8.9-10.3 -> 10.7-11.8). Weights in the
// caches favour oneDNN (a benchmark loop's 1x1024x1024: 84 against 110 us; 1x256x768: 11.6
// against 20.3), but inside a model the layers before a classifier have evicted its weights: from
// 2^18 weights (1 MiB; 2^21 until session 24) the row kernel also takes the classifiers of
// 1280 x 1000 (batch 1, one thread, medians of 5 alternated runs: EfficientNet-B0 11.76 -> 11.58
// ms, MobileNetV2 7.00 -> 6.73, MnasNet 1.0 7.22 -> 7.12, MobileNetV3-Large 5.95 -> 5.76;
// two threads: EfficientNet-B0 7.36 -> 6.75, MobileNetV2 3.85 -> 3.80). ResNet-18's 512 x 1000
// and DenseNet-121's 1024 x 1000 measured the same either way.
constexpr int64_t kRowPanelMinWeights = int64_t{1} << 18;
constexpr int64_t kMaxPanelRows = 2;

// y[0, m) x [16 p, 16 p + 16) = a[m, k] b for the panels p in [p0, p1) of `panels` ([panel][k][16],
// zeros past column n), rows in blocks of 4 kept in registers over k; a block short of 4 rows
// repeats its first row for the missing ones and stores only its own.
__attribute__((target("avx2,fma"))) void PanelProductAvx2(int64_t m, int64_t n, int64_t k,
                                                          const float* a, int64_t lda,
                                                          const float* panels, int64_t p0,
                                                          int64_t p1, float* y, int64_t ldy) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* b = panels + p * k * kPanelWidth;
    const int64_t j = p * kPanelWidth, cols = std::min(kPanelWidth, n - j);
    for (int64_t i = 0; i < m; i += 4) {
      const int64_t rows = std::min<int64_t>(4, m - i);
      const float* a0 = a + i * lda;
      const float* a1 = rows > 1 ? a0 + lda : a0;
      const float* a2 = rows > 2 ? a0 + 2 * lda : a0;
      const float* a3 = rows > 3 ? a0 + 3 * lda : a0;
      // Eight named accumulators, so that they stay in registers through the k loop.
      __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
      __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
      for (int64_t kk = 0; kk < k; ++kk) {
        const __m256 b0 = _mm256_loadu_ps(b + kk * kPanelWidth);
        const __m256 b1 = _mm256_loadu_ps(b + kk * kPanelWidth + 8);
        __m256 v = _mm256_broadcast_ss(a0 + kk);
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(a1 + kk);
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(a2 + kk);
        c20 = _mm256_fmadd_ps(v, b0, c20);
        c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(a3 + kk);
        c30 = _mm256_fmadd_ps(v, b0, c30);
        c31 = _mm256_fmadd_ps(v, b1, c31);
      }
      const __m256 c[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
      for (int64_t r = 0; r < rows; ++r) {
        float* out = y + (i + r) * ldy + j;
        if (cols == kPanelWidth) {
          _mm256_storeu_ps(out, c[r][0]);
          _mm256_storeu_ps(out + 8, c[r][1]);
        } else {
          alignas(32) float row[kPanelWidth];
          _mm256_store_ps(row, c[r][0]);
          _mm256_store_ps(row + 8, c[r][1]);
          std::memcpy(out, row, static_cast<size_t>(cols) * sizeof(float));
        }
      }
    }
  }
}

// y[0, kRows) x [16 p, 16 p + 16) = a[kRows, k] b for the panels p in [p0, p1) (the layout of
// PanelProductAvx2), a few rows: per row kUnroll sums over every kUnroll-th k, so that the
// multiply-adds do not wait on each other, added at the end; each panel row loaded once for all
// rows; a panel past column n stores only its columns.
template <typename V, int kRows, int kUnroll>
__attribute__((always_inline)) inline void RowsPanelBody(int64_t n, int64_t k, const float* a,
                                                         int64_t lda, const float* panels,
                                                         int64_t p0, int64_t p1, float* y,
                                                         int64_t ldy) {
  constexpr int64_t kVectors = kPanelWidth * static_cast<int64_t>(sizeof(float)) / sizeof(V);
  constexpr int64_t kLanes = kPanelWidth / kVectors;
  for (int64_t p = p0; p < p1; ++p) {
    const float* b = panels + p * k * kPanelWidth;
    V sum[kRows][kUnroll][kVectors];
    for (auto& row : sum) {
      for (auto& part : row) {
        for (V& v : part) v = V{};
      }
    }
    auto step = [&](int64_t kk, int u) __attribute__((always_inline)) {
      V w[kVectors];
      for (int64_t v = 0; v < kVectors; ++v) LoadFloats(b + kk * kPanelWidth + v * kLanes, &w[v]);
      for (int r = 0; r < kRows; ++r) {
        const float x = a[r * lda + kk];
        for (int64_t v = 0; v < kVectors; ++v) sum[r][u][v] += x * w[v];
      }
    };
    int64_t kk = 0;
    for (; kk + kUnroll <= k; kk += kUnroll) {
      for (int u = 0; u < kUnroll; ++u) step(kk + u, u);
    }
    for (; kk < k; ++kk) step(kk, 0);
    const int64_t j = p * kPanelWidth, cols = std::min(kPanelWidth, n - j);
    for (int r = 0; r < kRows; ++r) {
      alignas(64) float row[kPanelWidth];
      for (int64_t v = 0; v < kVectors; ++v) {
        V total = sum[r][0][v];
        for (int u = 1; u < kUnroll; ++u) total += sum[r][u][v];
        StoreFloats(row + v * kLanes, total);
      }
      std::memcpy(y + r * ldy + j, row, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

// RowsPanelBody for one row (four sums in flight) or two (two each).
template <typename V>
__attribute__((always_inline)) inline void RowsPanel(int64_t m, int64_t n, int64_t k,
                                                     const float* a, int64_t lda,
                                                     const float* panels, int64_t p0, int64_t p1,
                                                     float* y, int64_t ldy) {
  if (m == 1) {
    RowsPanelBody<V, 1, 4>(n, k, a, lda, panels, p0, p1, y, ldy);
  } else {
    RowsPanelBody<V, 2, 2>(n, k, a, lda, panels, p0, p1, y, ldy);
  }
}

__attribute__((target("avx512f"))) void RowsPanelAvx512(int64_t m, int64_t n, int64_t k,
                                                        const float* a, int64_t lda,
                                                        const float* panels, int64_t p0, int64_t p1,
                                                        float* y, int64_t ldy) {
  RowsPanel<Floats16>(m, n, k, a, lda, panels, p0, p1, y, ldy);
}

__attribute__((target("avx2,fma"))) void RowsPanelAvx2(int64_t m, int64_t n, int64_t k,
                                                       const float* a, int64_t lda,
                                                       const float* panels, int64_t p0, int64_t p1,
                                                       float* y, int64_t ldy) {
  RowsPanel<Floats8>(m, n, k, a, lda, panels, p0, p1, y, ldy);
}

// A row of B (in floats) whose stride is a multiple of this makes sgemm's reads of B alias in
// the cache (gemm.h); such rows are kept kLeadingPad floats longer.
constexpr int64_t kAliasingStride = 128;
constexpr int64_t kLeadingPad = 16;

}  // namespace

std::shared_ptr<const PackedProduct> PackedProduct::Make(const PrepareContext& context, int64_t m,
                                                         int64_t n, int64_t k, int64_t lda,
                                                         bool trans_b, const float* b, int64_t ldb,
                                                         int64_t ldy,
                                                         int64_t row_kernel_min_weights) {
  if (b == nullptr || m <= 0 || n <= 0 || k <= 0) return nullptr;
  if (ldy == 0) ldy = n;
  if (row_kernel_min_weights <= 0) row_kernel_min_weights = kRowPanelMinWeights;
  using dnnl::memory;
  try {
    const dnnl::engine& engine = CpuEngine();
    auto product = std::make_shared<PackedProduct>();
    product->m_ = m;  // the sizes our kernel and sgemm use (the primitive has its own)
    product->n_ = n;
    product->k_ = k;
    product->lda_ = lda;
    product->ldy_ = ldy;
    product->src_ = memory::desc({m, k}, memory::data_type::f32, memory::dims{lda, 1});
    product->dst_ = memory::desc({m, n}, memory::data_type::f32, memory::dims{ldy, 1});
    const memory::desc plain({k, n}, memory::data_type::f32,
                             trans_b ? memory::dims{1, ldb} : memory::dims{ldb, 1});
    // B in panels of 16 columns for our kernels, packed once (keyed by how it reads b).
    auto pack_panels = [&] {
      const int64_t count = (n + kPanelWidth - 1) / kPanelWidth;
      product->panels_ = true;
      product->weights_ =
          PackWeightsVia(context, b, plain, PlainDesc({count, k, kPanelWidth}), [&](memory& to) {
            PackColumnPanels(k, n, trans_b, b, ldb, static_cast<float*>(to.get_data_handle()));
          });
    };
    if (m <= kMaxPanelRows && OwnCopyLevel() >= 1 && n * k >= row_kernel_min_weights) {
      pack_panels();
      product->row_kernel_ = true;
      return product;
    }
    const memory::desc any({k, n}, memory::data_type::f32, memory::format_tag::any);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(product->src_, any, product->dst_),
                                          attr, engine);
    const memory::desc chosen = pd.weights_desc();
    const bool plain_b = chosen.data.format_kind == dnnl_blocked &&
                         chosen.data.format_desc.blocking.inner_nblks == 0;
    if (plain_b && m >= kPanelMinRows && m <= kPanelMaxRows && OwnCopyLevel() >= 1) {
      pack_panels();
      return product;
    }
    if (m >= kSgemmRowsForPlainB && plain_b) {
      // oneDNN keeps B plain: sgemm on B row-major, its rows padded off the aliasing strides
      // (a copy only where B is read transposed or its rows alias).
      const bool aliasing = ldb % kAliasingStride == 0;
      if (!trans_b && !aliasing) return nullptr;
      product->sgemm_ = true;
      product->ldb_ = n % kAliasingStride == 0 ? n + kLeadingPad : n;
      product->weights_ = PackWeights(
          context, b, plain, memory::desc({k, n}, memory::data_type::f32, {product->ldb_, 1}));
      return product;
    }
    if (!PreferPackedProduct(m, n, k, trans_b)) return nullptr;
    product->weights_ = PackWeights(context, b, plain, pd.weights_desc());
    product->scratch_ = pd.scratchpad_desc();
    product->primitive_ = dnnl::matmul(pd);
    return product;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

namespace {

// The memory objects bound to the operands of the last products a thread ran, by product id:
// creating them costs about a microsecond a call (bench machine), more than a small product.
struct BoundOperands {
  uint64_t id = 0;  // 0: empty
  dnnl::memory src, dst, scratch;
};
constexpr size_t kBoundSlots = 8;

uint64_t NextProductId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

PackedProduct::PackedProduct() : id_(NextProductId()) {}

absl::Status PackedProduct::Run(const float* a, float* y, void* scratch) const {
  using dnnl::memory;
  if (sgemm_) {
    return Sgemm(false, false, m_, n_, k_, 1.0f, a, lda_,
                 static_cast<const float*>(weights_->get_data_handle()), ldb_, 0.0f, y, ldy_);
  }
  if (panels_) {
    const float* panels = static_cast<const float*>(weights_->get_data_handle());
    const int64_t count = (n_ + kPanelWidth - 1) / kPanelWidth;
    if (row_kernel_) {
      static const auto rows_kernel = OwnCopyLevel() >= 2 ? &RowsPanelAvx512 : &RowsPanelAvx2;
      // A panel is k x 64 bytes from memory, at about 16 bytes per ns.
      ParallelFor(count, omp_get_max_threads(), static_cast<double>(k_) * 4.0,
                  [&](int64_t begin, int64_t end) {
                    rows_kernel(m_, n_, k_, a, lda_, panels, begin, end, y, ldy_);
                  });
      return absl::OkStatus();
    }
    // A panel costs m x k x 16 multiply-adds, about m x k / 8 ns here.
    ParallelFor(count, omp_get_max_threads(), static_cast<double>(m_ * k_) / 8.0,
                [&](int64_t begin, int64_t end) {
                  PanelProductAvx2(m_, n_, k_, a, lda_, panels, begin, end, y, ldy_);
                });
    return absl::OkStatus();
  }
  thread_local std::array<BoundOperands, kBoundSlots> bound;
  thread_local size_t next_slot = 0;
  const bool has_scratch = scratch_.get_size() > 0;
  try {
    const dnnl::engine& engine = CpuEngine();
    BoundOperands* slot = nullptr;
    for (BoundOperands& b : bound) {
      if (b.id == id_) slot = &b;
    }
    if (slot == nullptr) {
      slot = &bound[next_slot];
      next_slot = (next_slot + 1) % kBoundSlots;
      slot->id = 0;  // until every object is bound
      slot->src = memory(src_, engine, const_cast<float*>(a));
      slot->dst = memory(dst_, engine, y);
      if (has_scratch) slot->scratch = memory(scratch_, engine, scratch);
      slot->id = id_;
    } else {
      slot->src.set_data_handle(const_cast<float*>(a));
      slot->dst.set_data_handle(y);
      if (has_scratch) slot->scratch.set_data_handle(scratch);
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, slot->src.get()},
                               {DNNL_ARG_WEIGHTS, weights_->get()},
                               {DNNL_ARG_DST, slot->dst.get()},
                               {DNNL_ARG_SCRATCHPAD, has_scratch ? slot->scratch.get() : nullptr}};
    const int count = has_scratch ? 4 : 3;
    dnnl_status_t status =
        dnnl_primitive_execute(primitive_.get(), ThreadStream().get(), count, args);
    if (status == dnnl_success) status = dnnl_stream_wait(ThreadStream().get());
    if (status != dnnl_success) {
      return absl::InternalError(
          absl::StrCat("oneDNN matmul failed (status ", static_cast<int>(status), ")"));
    }
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN matmul failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
