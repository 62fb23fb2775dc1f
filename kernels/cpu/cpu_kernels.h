// The CPU backend's kernel table.
#ifndef REPRISE_KERNELS_CPU_CPU_KERNELS_H_
#define REPRISE_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Registers every CPU kernel into `registry`. Called once per backend; no static initialisers.
absl::Status RegisterCpuKernels(runtime::KernelRegistry* registry);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CPU_KERNELS_H_
