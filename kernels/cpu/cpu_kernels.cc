#include "kernels/cpu/cpu_kernels.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/binary.h"
#include "kernels/cpu/cpu_kernel_state.h"
#include "kernels/cpu/families.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {

absl::string_view ConvChainLayoutName(ConvChainLayout layout) {
  return layout == ConvChainLayout::kNhwc ? "nhwc" : "auto";
}

absl::StatusOr<ConvChainLayout> ParseConvChainLayout(absl::string_view name) {
  if (name == "auto") return ConvChainLayout::kAuto;
  if (name == "nhwc") return ConvChainLayout::kNhwc;
  return absl::InvalidArgumentError(
      absl::StrCat("conv chain layout \"", name, "\" is neither auto nor nhwc"));
}

absl::string_view OutputClearingName(OutputClearing mode) {
  switch (mode) {
    case OutputClearing::kOn:
      return "on";
    case OutputClearing::kOff:
      return "off";
    case OutputClearing::kAuto:
      break;
  }
  return "auto";
}

absl::StatusOr<OutputClearing> ParseOutputClearing(absl::string_view name) {
  if (name == "auto") return OutputClearing::kAuto;
  if (name == "on") return OutputClearing::kOn;
  if (name == "off") return OutputClearing::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("output clearing \"", name, "\" is none of auto, on, off"));
}

absl::Status RegisterCpuKernels(runtime::KernelRegistry* registry,
                                const CpuKernelOptions& options) {
  RETURN_IF_ERROR(registry->SetState(std::make_shared<CpuKernelState>(options)));
  RETURN_IF_ERROR(RegisterBinaryKernels(registry));
  RETURN_IF_ERROR(RegisterUnaryKernels(registry));
  RETURN_IF_ERROR(RegisterCastKernels(registry));
  RETURN_IF_ERROR(RegisterShapeKernels(registry));
  RETURN_IF_ERROR(RegisterLayoutKernels(registry));
  RETURN_IF_ERROR(RegisterFusedTransposeKernels(registry));
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
  RETURN_IF_ERROR(RegisterChannelNormKernels(registry));
  RETURN_IF_ERROR(RegisterGemmKernels(registry));
  RETURN_IF_ERROR(RegisterEinsumKernels(registry));
  RETURN_IF_ERROR(RegisterConvKernels(registry));
  RETURN_IF_ERROR(RegisterConvTransposeKernels(registry));
  RETURN_IF_ERROR(RegisterPoolKernels(registry));
  RETURN_IF_ERROR(RegisterRoiAlignKernels(registry));
  RETURN_IF_ERROR(RegisterOnednnPoolKernels(registry));
  RETURN_IF_ERROR(RegisterOnednnConcatKernels(registry));
  RETURN_IF_ERROR(RegisterChainKernels(registry));
  RETURN_IF_ERROR(RegisterResizeKernels(registry));
  RETURN_IF_ERROR(RegisterGeluKernels(registry));
  RETURN_IF_ERROR(RegisterLossKernels(registry));
  RETURN_IF_ERROR(RegisterQuantizeKernels(registry));
  RETURN_IF_ERROR(RegisterQuantizedOpKernels(registry));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
