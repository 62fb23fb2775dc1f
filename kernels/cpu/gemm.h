// Row-major single-precision GEMM on oneDNN's sgemm, for the kernels that multiply matrices
// of their own (Gemm / MatMul, ConvTranspose, the recurrent cells).
#ifndef REPRISE_KERNELS_CPU_GEMM_H_
#define REPRISE_KERNELS_CPU_GEMM_H_

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "dnnl.hpp"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, on the calling thread's intra-op
/// threads (UseIntraOpThreads). A zero-sized product is handled here (sgemm rejects it); a
/// failure of oneDNN is an InternalError naming the sizes.
absl::Status Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);

/// Runs `products(begin, end)` over the products [0, count) of a batch of `macs` multiply-adds
/// each, on up to `threads` intra-op threads. With at least twice as many products as threads,
/// or small products, the batch is split over the threads and each product runs on one thread
/// (sgemm's own threading costs more than it gains on a small matrix, once per product);
/// otherwise products(0, count) runs here and each sgemm uses the threads. The first error of a
/// range is returned.
absl::Status ForEachProductRange(int64_t count, int64_t macs, int threads,
                                 absl::FunctionRef<absl::Status(int64_t, int64_t)> products);

/// The most rows of A for which PreferPackedProduct takes an untransposed B.
inline constexpr int64_t kPackedProductMaxRows = 256;

/// Where PackedProduct beats sgemm (bench machine, one thread): a transposed B (sgemm's NT path:
/// 8x9216x4096 18.5 -> 5.4 ms), or up to 256 rows against at least 2^18 weights (128x512x2048
/// 2.3 -> 1.3 ms). Many rows or few weights gain nothing and pay the primitive's fixed cost
/// (transformer_enc_d128 at batch 1, 64x128x512: 2 % slower; Swin-T 1 %).
bool PreferPackedProduct(int64_t m, int64_t n, int64_t k, bool trans_b);

/// Y[M,N] = A[M,K] B[K,N], row-major A (leading dimension lda) and Y (ldy, N when 0), with B a
/// constant (op(B) read from `b` with leading dimension ldb) reordered once, at prepare, into
/// the blocked layout of oneDNN's matmul primitive (shared through the device's packed-weight
/// cache): sgemm packs B again on every call. The scratchpad is the caller's workspace, so one
/// kernel can run on several streams at once.
///
/// Where oneDNN 2.6 has no blocked layout for B (its matmul without AVX-512 is `gemm:jit`), the
/// primitive is slower than sgemm from 32 rows (AVX2 VM, one thread, 128x512 by 512x2048: 6.9
/// ms against 3.4-3.9; 197x4096x4096: 180 against 105-110), though often faster below (8x3072x768
/// 0.87 against 1.87). There sgemm reads B row-major, and a row stride of a multiple of 128
/// floats (512 bytes) makes its reads alias in the cache: 128x512 by 512x2048 takes 6.6-8.9 ms
/// with rows of 2048 floats, 3.4-4.0 with rows of 2064 (768x3072: 16.6-20.3 against 8.4-9.1;
/// 1024x1024: 6.6-8.1 against 3.2-3.3), and a transposed B read untransposed is faster too
/// (2048x512: 3.8-4.1 against 3.6-3.7). So from 32 rows a PackedProduct whose B stays plain
/// keeps B row-major in rows padded off those strides (a copy, shared like the blocked
/// weights) and runs sgemm on it, or is null where the stored B is already such. From 2 to 16
/// rows on a CPU with AVX2 and FMA, B goes into panels of 16 columns ([panel][K][16], zeros past
/// N; packed once and shared the same way) for our own kernel, which keeps 4 rows x 16 columns
/// of Y in registers over K and reads each panel once per 4 rows (packed_product.cc): an LSTM
/// step's 8x256x1024 took 0.05 ms against sgemm's 0.215, AlexNet's first fully connected layer at
/// batch 8 (8x9216x4096) 17.5-20 ms against 42-50 (AVX2 VM, one thread, a prototype of the kernel).
/// One or two rows by 2^18 weights or more (1 MiB: inside a model they come from memory or L3,
/// not the inner caches) take the same panels on every CPU with AVX2, for our row kernel, which
/// reads each panel as one stream (AlexNet's first fully connected layer,
/// BM_FewRowsProduct/1/9216/4096, one thread: 10.5-10.9 ms with oneDNN's AVX-512 matmul, 6.2-7.4
/// ours; two rows 11.5-16.9 against 8.6-9.2; packed_product.cc, kRowPanelMinWeights).
class PackedProduct {
 public:
  PackedProduct();
  /// Null when oneDNN has no matmul for these operands here, when PreferPackedProduct says no,
  /// or when sgemm reads the stored B as well as a copy (the caller keeps sgemm).
  /// `row_kernel_min_weights`: the fewest weights (n x k) one or two rows take the row kernel
  /// with; 0 for the default (2^18).
  static std::shared_ptr<const PackedProduct> Make(const runtime::PrepareContext& context,
                                                   int64_t m, int64_t n, int64_t k, int64_t lda,
                                                   bool trans_b, const float* b, int64_t ldb,
                                                   int64_t ldy = 0,
                                                   int64_t row_kernel_min_weights = 0);

  size_t scratch_bytes() const { return scratch_.get_size(); }
  /// True when the product runs on our row kernel (one or two rows by large weights).
  bool row_kernel() const { return row_kernel_; }

  /// Y = A B on the calling thread's intra-op threads; `scratch` holds scratch_bytes().
  absl::Status Run(const float* a, float* y, void* scratch) const;

 private:
  const uint64_t id_;  // names the memory objects a thread binds to this product's operands
  // sgemm on weights_ (row-major, leading dimension ldb_) instead of the primitive.
  bool sgemm_ = false;
  // Our AVX2 kernel on weights_ in panels of 16 columns ([panel][K][16]) instead.
  bool panels_ = false;
  // With panels_: one or two rows by large weights, on the row kernel (packed_product.cc).
  bool row_kernel_ = false;
  int64_t m_ = 0, n_ = 0, k_ = 0, lda_ = 0, ldb_ = 0, ldy_ = 0;
  dnnl::memory::desc src_, dst_, scratch_;
  std::shared_ptr<const dnnl::memory> weights_;
  dnnl::matmul primitive_;
};

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_GEMM_H_
