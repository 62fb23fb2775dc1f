// What the CPU kernels keep per device: the options they were registered with and the cache of
// weights packed into oneDNN's layouts.
#ifndef REPRISE_KERNELS_CPU_CPU_KERNEL_STATE_H_
#define REPRISE_KERNELS_CPU_CPU_KERNEL_STATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

class PackedWeightCache;  // onednn_util.h

/// Counters of one device's packed-weight cache.
struct PackedWeightStats {
  size_t live = 0;      // packed weights some kernel still holds
  uint64_t packed = 0;  // weights reordered into a layout (cache misses)
  uint64_t reused = 0;  // packed weights found in the cache (hits)
};

/// The CPU kernel library's state (runtime::KernelState), installed in a registry by
/// RegisterCpuKernels: one per device, so two devices neither share options nor packed weights.
/// The cache holds its entries weakly: packed weights live as long as a kernel uses them, and the
/// cache goes with the registry (kernels keep their packed weights, not the cache).
///
/// Thread-safety: thread-safe.
class CpuKernelState final : public runtime::KernelState {
 public:
  explicit CpuKernelState(const CpuKernelOptions& options);
  ~CpuKernelState() override;
  CpuKernelState(const CpuKernelState&) = delete;
  CpuKernelState& operator=(const CpuKernelState&) = delete;

  const CpuKernelOptions& options() const { return options_; }
  /// The device's packed weights (onednn_util.h, PackWeights).
  PackedWeightCache& weight_cache() const { return *weights_; }
  PackedWeightStats weight_stats() const;

 private:
  const CpuKernelOptions options_;
  const std::unique_ptr<PackedWeightCache> weights_;
};

/// The state RegisterCpuKernels installed in `registry`; null when it has none (or another
/// library's). Borrowed from the registry.
const CpuKernelState* CpuKernelStateOf(const runtime::KernelRegistry& registry);

/// The state of the registry preparing `context`; null when the factory was called outside a
/// registry filled by RegisterCpuKernels (the kernel then prepares with the default options and
/// shares no packed weights). Borrowed from the context.
const CpuKernelState* CpuKernelStateOf(const runtime::PrepareContext& context);

/// The options of the registry preparing `context`, or the defaults outside one.
const CpuKernelOptions& CpuOptionsOf(const runtime::PrepareContext& context);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_CPU_KERNEL_STATE_H_
