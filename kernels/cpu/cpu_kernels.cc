#include "kernels/cpu/cpu_kernels.h"

#include "kernels/cpu/binary.h"
#include "kernels/cpu/families.h"
#include "runtime/core/status_macros.h"

namespace reprise::kernels::cpu {

absl::Status RegisterCpuKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(RegisterBinaryKernels(registry));
  RETURN_IF_ERROR(RegisterUnaryKernels(registry));
  RETURN_IF_ERROR(RegisterCastKernels(registry));
  RETURN_IF_ERROR(RegisterShapeKernels(registry));
  RETURN_IF_ERROR(RegisterLayoutKernels(registry));
  RETURN_IF_ERROR(RegisterGatherKernels(registry));
  RETURN_IF_ERROR(RegisterScatterKernels(registry));
  RETURN_IF_ERROR(RegisterGeneratorKernels(registry));
  RETURN_IF_ERROR(RegisterRandomKernels(registry));
  RETURN_IF_ERROR(RegisterRecurrentKernels(registry));
  RETURN_IF_ERROR(RegisterSignalKernels(registry));
  RETURN_IF_ERROR(RegisterSelectKernels(registry));
  RETURN_IF_ERROR(RegisterTfIdfKernels(registry));
  RETURN_IF_ERROR(RegisterReduceKernels(registry));
  RETURN_IF_ERROR(RegisterTopKKernels(registry));
  RETURN_IF_ERROR(RegisterNormalizationKernels(registry));
  RETURN_IF_ERROR(RegisterGemmKernels(registry));
  RETURN_IF_ERROR(RegisterEinsumKernels(registry));
  RETURN_IF_ERROR(RegisterConvKernels(registry));
  RETURN_IF_ERROR(RegisterPoolKernels(registry));
  RETURN_IF_ERROR(RegisterOnednnPoolKernels(registry));
  RETURN_IF_ERROR(RegisterResizeKernels(registry));
  RETURN_IF_ERROR(RegisterGeluKernels(registry));
  RETURN_IF_ERROR(RegisterLossKernels(registry));
  RETURN_IF_ERROR(RegisterQuantizeKernels(registry));
  RETURN_IF_ERROR(RegisterQuantizedOpKernels(registry));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
