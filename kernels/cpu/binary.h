// Elementwise ops of two or more inputs with numpy broadcasting: Add (with the `alpha`
// attribute of old opsets, out = a + b * alpha), Sub, Mul, Div, Pow, Min, Max, Sum, Mean,
// the comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), And, Or, Xor, PRelu and
// Where, Mod and BitShift.
#ifndef REPRISE_KERNELS_CPU_BINARY_H_
#define REPRISE_KERNELS_CPU_BINARY_H_

#include "absl/status/status.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Registers the binary, variadic and ternary elementwise kernels.
absl::Status RegisterBinaryKernels(runtime::KernelRegistry* registry);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_BINARY_H_
