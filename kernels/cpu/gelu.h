// GELU on float32 arrays (vectorised, dispatched per CPU on first use): the standalone Gelu
// kernel (gelu.cc) and the fused MatMul epilogue (gemm.cc) share it.
#ifndef REPRISE_KERNELS_CPU_GELU_H_
#define REPRISE_KERNELS_CPU_GELU_H_

#include <cstdint>

namespace reprise::kernels::cpu {

/// y[i] = GELU(x[i]) for i < n; `x` may equal `y` (in place). `tanh_approx` selects ONNX's
/// approximate="tanh" form, otherwise x * 0.5 * (1 + erf(x / sqrt(2))). erf and tanh are
/// rational approximations, within 5e-7 absolute of the exact functions. Thread-safe.
void Gelu(const float* x, float* y, int64_t n, bool tanh_approx);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_GELU_H_
