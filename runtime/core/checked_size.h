// Overflow-checked size arithmetic: the one place where element counts, byte sizes, strides and
// offsets computed from outside data (requests, model files, configs, .npy) are multiplied and
// added. Every helper returns false / an error instead of wrapping; nothing here allocates.
#ifndef REPRISE_RUNTIME_CORE_CHECKED_SIZE_H_
#define REPRISE_RUNTIME_CORE_CHECKED_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace reprise::runtime {

/// a * b into *out; false (and *out untouched) when the product overflows int64 or an operand is
/// negative.
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/// a + b into *out; false when the sum overflows int64 or an operand is negative.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/// The same for size_t (allocation sizes).
inline bool CheckedMulSize(size_t a, size_t b, size_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool CheckedAddSize(size_t a, size_t b, size_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

/// Product of `dims`, or nullopt when a dimension is negative or the product exceeds `limit`.
/// Unlike a plain product, a zero dimension does not stop the check: every dimension is
/// checked against `limit` on its own and the product of the non-zero dimensions must stay
/// within it too, so `[0, 2^61]` is refused like `[1, 2^61]` (its buffers are sized from the
/// non-zero dimensions by padding, slicing and batching).
inline std::optional<int64_t> CheckedElementCount(
    absl::Span<const int64_t> dims, int64_t limit = std::numeric_limits<int64_t>::max()) {
  int64_t nonzero = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0 || d > limit) return std::nullopt;
    if (d == 0) {
      zero = true;
      continue;
    }
    if (!CheckedMul(nonzero, d, &nonzero) || nonzero > limit) return std::nullopt;
  }
  return zero ? 0 : nonzero;
}

/// count * element_size, or nullopt on overflow or when the result exceeds `limit`.
inline std::optional<int64_t> CheckedByteSize(int64_t count, int64_t element_size,
                                              int64_t limit = std::numeric_limits<int64_t>::max()) {
  int64_t bytes = 0;
  if (!CheckedMul(count, element_size, &bytes) || bytes > limit) return std::nullopt;
  return bytes;
}

/// Byte size of a dense tensor of `dims` with `element_size`-byte elements, as a status:
/// INVALID_ARGUMENT naming `what` when a dimension is negative or the size overflows int64.
inline absl::StatusOr<int64_t> DenseByteSize(absl::Span<const int64_t> dims, int64_t element_size,
                                             absl::string_view what) {
  std::optional<int64_t> count = CheckedElementCount(dims);
  std::optional<int64_t> bytes =
      count.has_value() ? CheckedByteSize(*count, element_size) : std::nullopt;
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(dims, ","),
                                                   "] has a negative dimension or overflows"));
  }
  return *bytes;
}

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_CHECKED_SIZE_H_
