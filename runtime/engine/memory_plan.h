// Liveness-based placement of intermediate tensors in one arena.
#ifndef REPRISE_RUNTIME_ENGINE_MEMORY_PLAN_H_
#define REPRISE_RUNTIME_ENGINE_MEMORY_PLAN_H_

#include <cstddef>
#include <vector>

namespace reprise::runtime::engine {

/// A buffer that is live from step `first` to step `last` (inclusive).
struct BufferLifetime {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
};

/// Where a buffer is used when its plan runs parallel branches (branch_plan.h): buffers of the
/// same region on different lanes may be live at the same time whatever their step numbers.
/// `region` -1: the buffer is not confined to one lane (its lifetime must then cover every
/// region it touches).
struct BufferLane {
  int region = -1;
  int lane = -1;
};

/// Where each buffer lives in the arena.
struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, multiples of kBufferAlignment
  size_t arena_bytes = 0;       // the arena's size
  size_t total_bytes = 0;       // sum of all buffers' sizes (each rounded up to the alignment)
};

/// Places the buffers so that two whose lifetimes overlap never share a byte; buffers are
/// placed largest first, each at the lowest aligned offset free during its lifetime. Always
/// `arena_bytes <= total_bytes`.
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers);
/// The same, where two buffers also conflict when `lanes` (empty, or one per buffer) puts them
/// in the same region on different lanes.
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers,
                      const std::vector<BufferLane>& lanes);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_MEMORY_PLAN_H_
