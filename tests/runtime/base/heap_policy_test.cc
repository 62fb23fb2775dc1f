#include "runtime/base/heap_policy.h"

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace reprise::runtime {
namespace {

// After KeepLargeBlocksInHeap, a 96 MiB block comes from the heap (no mapping of its own), and
// once freed its bytes stay in the heap for the next one instead of going back to the kernel.
// (96 MiB is above the most glibc's own adjustments would keep: 64 MiB.)
TEST(HeapPolicyTest, LargeBlocksComeFromAndStayInTheHeap) {
  if (!KeepLargeBlocksInHeap()) GTEST_SKIP() << "not glibc's own malloc (sanitizer or other libc)";
#if defined(__GLIBC__)
  constexpr size_t kBytes = size_t{96} << 20;
  const size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  EXPECT_LT(mallinfo2().hblkhd, mapped_before + kBytes);
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, kBytes);
#endif
}

}  // namespace
}  // namespace reprise::runtime
