// A heap buffer aligned to 64 bytes (a cache line; enough for AVX-512 loads).
#ifndef REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_
#define REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace reprise::runtime::engine {

inline constexpr size_t kBufferAlignment = 64;

/// Rounds `bytes` up to a multiple of kBufferAlignment.
inline size_t AlignUp(size_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Owns `size()` zero-initialised bytes at a 64-byte aligned address. Move-only. A zero-size
/// buffer still has a valid, unique, aligned address (one aligned block).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size)
      : data_(static_cast<uint8_t*>(
            ::operator new (AlignUp(size == 0 ? 1 : size), std::align_val_t{kBufferAlignment}))),
        size_(size) {
    std::fill_n(data_.get(), AlignUp(size == 0 ? 1 : size), uint8_t{0});
  }
  /// The same without throwing: RESOURCE_EXHAUSTED naming `bytes` when the memory cannot be
  /// had. The request and load paths allocate through this, so that a failed allocation is an
  /// error status and never an abort.
  static absl::StatusOr<AlignedBuffer> Allocate(size_t size) {
    const size_t bytes = AlignUp(size == 0 ? 1 : size);
    if (bytes < size) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
    }
    void* p = ::operator new (bytes, std::align_val_t{kBufferAlignment}, std::nothrow);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes: out of memory"));
    }
    AlignedBuffer buffer;
    buffer.data_.reset(static_cast<uint8_t*>(p));
    buffer.size_ = size;
    std::fill_n(buffer.data_.get(), bytes, uint8_t{0});
    return buffer;
  }

  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kBufferAlignment}); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_ALIGNED_BUFFER_H_
