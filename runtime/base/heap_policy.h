// How the process's heap keeps large blocks. A tensor of tens of MiB (a segmentation output at
// batch 8, a large request) is by default mapped fresh from the kernel for each allocation and
// unmapped when freed, so every inference pays a page fault per 4 KiB of it again; on virtual
// machines that is most of the run (docs/development.md, "Large blocks stay in the heap").
#ifndef REPRISE_RUNTIME_BASE_HEAP_POLICY_H_
#define REPRISE_RUNTIME_BASE_HEAP_POLICY_H_

#include <cstddef>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// Whether a sanitizer's allocator replaces malloc (GCC defines the macro, clang has the test).
#if defined(__SANITIZE_ADDRESS__)
#define REPRISE_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPRISE_SANITIZER_ALLOCATOR 1
#endif
#endif

namespace reprise::runtime {

/// Blocks below this size come from the heap (not a mapping of their own) once
/// KeepLargeBlocksInHeap has run.
inline constexpr size_t kHeapLargeBlockBytes = size_t{1} << 30;

/// Makes glibc's malloc serve blocks below kHeapLargeBlockBytes from the heap and keep up to as
/// many freed bytes at its top instead of returning them to the kernel, so that the next
/// inference reuses the same, already mapped pages. The process's resident size then stays at
/// its high-water mark. Returns false where it does not apply (another C library, or a
/// sanitizer's allocator, which ignores the settings).
inline bool KeepLargeBlocksInHeap() {
#if defined(__GLIBC__) && !defined(REPRISE_SANITIZER_ALLOCATOR)
  const int threshold = static_cast<int>(kHeapLargeBlockBytes);
  return mallopt(M_MMAP_THRESHOLD, threshold) == 1 && mallopt(M_TRIM_THRESHOLD, threshold) == 1;
#else
  return false;
#endif
}

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_BASE_HEAP_POLICY_H_
