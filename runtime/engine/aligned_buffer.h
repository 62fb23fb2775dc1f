// A heap buffer aligned to 64 bytes (a cache line; enough for AVX-512 loads).
#ifndef REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_
#define REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <sys/mman.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace reprise::runtime::engine {

inline constexpr size_t kBufferAlignment = 64;

/// Rounds `bytes` up to a multiple of kBufferAlignment.
inline size_t AlignUp(size_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Buffers from this size up are mapped from the kernel (mmap) rather than taken from malloc,
/// and given back to it when freed. Plans' buffers come and go with the shapes clients send;
/// from malloc, glibc's adaptive mmap threshold would soon put them on the heap, where a
/// sweep of growing shapes leaves memory the process never returns (measured with
/// tools/bench/shape_sweep.py: 52 MiB against 20 MiB of growth over 2,000 shapes).
/// Not under AddressSanitizer, which checks only what malloc hands out.
inline constexpr size_t kMappedBufferBytes = size_t{256} << 10;

/// Frees an AlignedBuffer's block: a mapping of `mapped` bytes, or operator new's when 0.
struct AlignedFree {
  size_t mapped = 0;
  void operator()(uint8_t* p) const {
    if (mapped > 0) {
      munmap(p, mapped);
    } else {
      ::operator delete (p, std::align_val_t{kBufferAlignment});
    }
  }
};

/// Owns `size()` zero-initialised bytes at a 64-byte aligned address. Move-only. A zero-size
/// buffer still has a valid, unique, aligned address (one aligned block).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  /// Throws std::bad_alloc when the memory cannot be had (tests and tools; the request and
  /// load paths use Allocate).
  explicit AlignedBuffer(size_t size) {
    absl::StatusOr<AlignedBuffer> buffer = Allocate(size);
    if (!buffer.ok()) throw std::bad_alloc();
    *this = *std::move(buffer);
  }
  /// The same without throwing: RESOURCE_EXHAUSTED naming `size` when the memory cannot be
  /// had. The request and load paths allocate through this, so that a failed allocation is an
  /// error status and never an abort.
  static absl::StatusOr<AlignedBuffer> Allocate(size_t size) {
    const size_t bytes = AlignUp(size == 0 ? 1 : size);
    if (bytes < size) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
    }
    AlignedBuffer buffer;
    buffer.size_ = size;
#if !defined(__SANITIZE_ADDRESS__)
    if (bytes >= kMappedBufferBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate ", size, " bytes: out of memory"));
      }
      // Mapped pages are zero already.
      buffer.data_ =
          std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(p), AlignedFree{bytes});
      return buffer;
    }
#endif
    void* p = ::operator new (bytes, std::align_val_t{kBufferAlignment}, std::nothrow);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes: out of memory"));
    }
    buffer.data_ = std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(p), AlignedFree{0});
    std::fill_n(buffer.data_.get(), bytes, uint8_t{0});
    return buffer;
  }

  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t, AlignedFree> data_;
  size_t size_ = 0;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_
