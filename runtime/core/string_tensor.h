// String tensors in host memory: building self-contained TensorValues of kString and reading
// their elements. A string tensor's memory is an array of StringElement views (data_type.h);
// these helpers keep the views and the bytes they point into together.
#ifndef REPRISE_RUNTIME_CORE_STRING_TENSOR_H_
#define REPRISE_RUNTIME_CORE_STRING_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime {

/// Element `i` of string tensor memory (an array of StringElement). `elements` is borrowed and
/// may be unaligned.
inline absl::string_view StringAt(const void* elements, int64_t i) {
  StringElement e;
  std::memcpy(&e, static_cast<const uint8_t*>(elements) + i * sizeof(StringElement), sizeof(e));
  return absl::string_view(e.data, e.size);
}

/// A string tensor of `shape` holding copies of `elements` (NumElements(shape) of them) in one
/// shared buffer.
TensorValue MakeStringTensor(Shape shape, std::span<const absl::string_view> elements);

/// A self-contained copy of the tensor of `dtype` and `shape` at `data` (borrowed for the call):
/// the bytes, and for kString the strings the views point to as well, so that the copy does not
/// depend on the memory it came from (a plan's buffers, a kernel's output storage).
TensorValue CopyTensorValue(DataType dtype, Shape shape, const void* data);

/// Checks that a kString value is consistent: `bytes` holds exactly one view per element of
/// `shape`, and every non-empty view lies inside `string_bytes`. INVALID_ARGUMENT naming `what`
/// otherwise. OK for other element types.
absl::Status CheckStringTensor(const TensorValue& value, absl::string_view what);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_STRING_TENSOR_H_
