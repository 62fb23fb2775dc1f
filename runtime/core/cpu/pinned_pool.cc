#include "runtime/core/cpu/pinned_pool.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace reprise::runtime::cpu {
namespace {

constexpr size_t kMinClass = 256;

size_t SizeClass(size_t bytes) {
  size_t capacity = kMinClass;
  while (capacity < bytes) capacity <<= 1;
  return capacity;
}

}  // namespace

PinnedPool::~PinnedPool() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, block] : blocks_) std::free(reinterpret_cast<void*>(address));
}

absl::StatusOr<void*> PinnedPool::Allocate(size_t bytes) {
  if (bytes > (size_t{1} << 40)) {
    return absl::ResourceExhaustedError(absl::StrCat("pinned allocation of ", bytes, " bytes"));
  }
  const size_t capacity = SizeClass(std::max<size_t>(bytes, 1));
  std::lock_guard<std::mutex> lock(mu_);
  void* ptr = nullptr;
  auto it = free_.find(capacity);
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    cached_ -= capacity;
  } else {
    ptr = std::aligned_alloc(64, capacity);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pinned allocation of ", bytes, " bytes failed"));
    }
  }
  Block& block = blocks_[reinterpret_cast<uintptr_t>(ptr)];
  block.capacity = capacity;
  block.requested = bytes;
  block.in_use = true;
  in_use_ += capacity;
  peak_ = std::max(peak_, in_use_);
  return ptr;
}

absl::Status PinnedPool::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.end() || !it->second.in_use) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pinned free of %p: not a pinned block in use", ptr));
  }
  it->second.in_use = false;
  in_use_ -= it->second.capacity;
  cached_ += it->second.capacity;
  free_[it->second.capacity].push_back(ptr);
  return absl::OkStatus();
}

bool PinnedPool::Contains(const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return false;
  --it;
  return it->second.in_use && address < it->first + it->second.capacity;
}

size_t PinnedPool::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t PinnedPool::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

size_t PinnedPool::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

}  // namespace reprise::runtime::cpu
