// Row-major single-precision GEMM on oneDNN's sgemm, for the kernels that multiply matrices
// of their own (Gemm / MatMul, ConvTranspose, the recurrent cells).
#ifndef REPRISE_KERNELS_CPU_GEMM_H_
#define REPRISE_KERNELS_CPU_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"

namespace reprise::kernels::cpu {

/// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, on the calling thread's intra-op
/// threads (UseIntraOpThreads). A zero-sized product is handled here (sgemm rejects it); a
/// failure of oneDNN is an InternalError naming the sizes.
absl::Status Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_GEMM_H_
