// Row-major single-precision GEMM on oneDNN's sgemm, for the kernels that multiply matrices
// of their own (Gemm / MatMul, ConvTranspose, the recurrent cells).
#ifndef REPRISE_KERNELS_CPU_GEMM_H_
#define REPRISE_KERNELS_CPU_GEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

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

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_GEMM_H_
