#include "runtime/engine/memory_plan.h"

#include <random>

#include "gtest/gtest.h"
#include "runtime/engine/aligned_buffer.h"

namespace reprise::runtime::engine {
namespace {

// Asserts that no two buffers with overlapping lifetimes share a byte and all fit the arena.
void ExpectValid(const std::vector<BufferLifetime>& buffers, const MemoryPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), buffers.size());
  size_t total = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    total += AlignUp(buffers[i].bytes);
    EXPECT_EQ(plan.offsets[i] % kBufferAlignment, 0u);
    EXPECT_LE(plan.offsets[i] + buffers[i].bytes, plan.arena_bytes);
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const bool live_together =
          !(buffers[i].last < buffers[j].first || buffers[j].last < buffers[i].first);
      if (!live_together || buffers[i].bytes == 0 || buffers[j].bytes == 0) continue;
      const bool disjoint = plan.offsets[i] + buffers[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + buffers[j].bytes <= plan.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << i << " and " << j << " overlap";
    }
  }
  EXPECT_EQ(plan.total_bytes, total);
  EXPECT_LE(plan.arena_bytes, plan.total_bytes);
}

TEST(MemoryPlanTest, ChainReusesMemory) {
  // a -> b -> c -> d, each consumed by the next step only.
  std::vector<BufferLifetime> chain = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan plan = PlanMemory(chain);
  ExpectValid(chain, plan);
  EXPECT_EQ(plan.arena_bytes, 2 * AlignUp(1000));
  EXPECT_EQ(plan.total_bytes, 4 * AlignUp(1000));
}

TEST(MemoryPlanTest, AllLiveTogetherNeedsTheSum) {
  std::vector<BufferLifetime> buffers = {{64, 0, 5}, {100, 1, 5}, {1, 2, 5}};
  MemoryPlan plan = PlanMemory(buffers);
  ExpectValid(buffers, plan);
  EXPECT_EQ(plan.arena_bytes, plan.total_bytes);
}

TEST(MemoryPlanTest, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> buffers(rng() % 40);
    for (auto& b : buffers) {
      b.bytes = rng() % 5000;
      b.first = static_cast<int>(rng() % 30);
      b.last = b.first + static_cast<int>(rng() % 8);
    }
    ExpectValid(buffers, PlanMemory(buffers));
  }
}

TEST(MemoryPlanTest, Empty) {
  MemoryPlan plan = PlanMemory({});
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_EQ(plan.total_bytes, 0u);
}

}  // namespace
}  // namespace reprise::runtime::engine
