// A pool of "pinned" host blocks (on the CPU backend: 64-byte aligned host memory) that reuses
// freed blocks by power-of-two size class instead of returning them to the system.
#ifndef REPRISE_RUNTIME_CORE_CPU_PINNED_POOL_H_
#define REPRISE_RUNTIME_CORE_CPU_PINNED_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace reprise::runtime::cpu {

/// Thread-safe. Blocks are freed to the system only when the pool is destroyed, which must be
/// after every block is given back (or no longer used).
class PinnedPool {
 public:
  PinnedPool() = default;
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  /// A block of at least `bytes` (64-byte aligned), reused from the pool when one is free.
  absl::StatusOr<void*> Allocate(size_t bytes);
  /// Gives a block back to the pool; error for a pointer that is not an in-use block.
  absl::Status Free(void* ptr);
  /// True when `ptr` lies inside a block in use.
  bool Contains(const void* ptr) const;

  size_t in_use() const;
  size_t peak() const;
  size_t cached() const;

 private:
  struct Block {
    size_t capacity = 0;
    size_t requested = 0;
    bool in_use = false;
  };

  mutable std::mutex mu_;
  std::map<uintptr_t, Block> blocks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_PINNED_POOL_H_
