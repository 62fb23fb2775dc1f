#include "kernels/cpu/cpu_kernel_state.h"

#include "kernels/cpu/onednn_util.h"

namespace reprise::kernels::cpu {

CpuKernelState::CpuKernelState(const CpuKernelOptions& options)
    : options_(options), weights_(std::make_unique<PackedWeightCache>()) {}

CpuKernelState::~CpuKernelState() = default;

PackedWeightStats CpuKernelState::weight_stats() const { return weights_->stats(); }

const CpuKernelState* CpuKernelStateOf(const runtime::KernelRegistry& registry) {
  return dynamic_cast<const CpuKernelState*>(registry.state().get());
}

const CpuKernelState* CpuKernelStateOf(const runtime::PrepareContext& context) {
  return dynamic_cast<const CpuKernelState*>(context.kernel_state.get());
}

const CpuKernelOptions& CpuOptionsOf(const runtime::PrepareContext& context) {
  // The defaults: a constant, not state.
  static const CpuKernelOptions kDefaults{};
  const CpuKernelState* state = CpuKernelStateOf(context);
  return state != nullptr ? state->options() : kDefaults;
}

}  // namespace reprise::kernels::cpu
