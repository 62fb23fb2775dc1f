#include "runtime/engine/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "runtime/engine/aligned_buffer.h"

namespace reprise::runtime::engine {

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers) {
  return PlanMemory(buffers, {});
}

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers,
                      const std::vector<BufferLane>& lanes) {
  auto parallel = [&lanes](size_t a, size_t b) {
    return !lanes.empty() && lanes[a].region >= 0 && lanes[a].region == lanes[b].region &&
           lanes[a].lane != lanes[b].lane;
  };
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  for (size_t id : order) {
    const BufferLifetime& buf = buffers[id];
    const size_t size = AlignUp(buf.bytes);
    plan.total_bytes += size;
    // Occupied ranges of already placed buffers whose lifetimes overlap this one.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t other : placed) {
      const BufferLifetime& o = buffers[other];
      if ((o.last < buf.first || buf.last < o.first) && !parallel(id, other)) continue;
      busy.emplace_back(plan.offsets[other], plan.offsets[other] + AlignUp(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (begin >= offset + size) break;  // the gap before this range fits
      offset = std::max(offset, end);
    }
    plan.offsets[id] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(id);
  }
  return plan;
}

}  // namespace reprise::runtime::engine
