#include "kernels/cpu/cpu_kernels.h"

#include "kernels/cpu/binary.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {

absl::Status RegisterCpuKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(RegisterBinaryKernels(registry));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
