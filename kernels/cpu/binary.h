// Binary elementwise ops with numpy broadcasting: Add (with an optional `alpha` attribute,
// out = a + b * alpha), Sub, Mul, Div.
#ifndef REPRISE_KERNELS_CPU_BINARY_H_
#define REPRISE_KERNELS_CPU_BINARY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Output shape of numpy-style broadcasting of `a` and `b`; error naming both when they do not
/// broadcast.
absl::StatusOr<runtime::Shape> BroadcastShapes(const runtime::Shape& a, const runtime::Shape& b);

absl::Status RegisterBinaryKernels(runtime::KernelRegistry* registry);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_BINARY_H_
