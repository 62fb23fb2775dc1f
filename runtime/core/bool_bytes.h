// Bool elements that come from outside (a request, a model file, a .npy file).
#ifndef REPRISE_RUNTIME_CORE_BOOL_BYTES_H_
#define REPRISE_RUNTIME_CORE_BOOL_BYTES_H_

#include <cstddef>
#include <cstdint>

namespace reprise::runtime {

/// Index of the first of `bytes` bytes at `data` that is neither 0 nor 1, or `bytes` when there
/// is none. Such a bool element is refused where it enters: kernels read the bytes as C++ bool,
/// for which any other value is undefined.
inline size_t FirstNonBoolByte(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
  while (i < bytes && p[i] <= 1) ++i;
  return i;
}

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_BOOL_BYTES_H_
