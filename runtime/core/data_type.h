// Element types of tensors and their sizes; shared by every layer above the core.
#ifndef REPRISE_RUNTIME_CORE_DATA_TYPE_H_
#define REPRISE_RUNTIME_CORE_DATA_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace reprise::runtime {

/// Element types. The numeric values follow ONNX's TensorProto.DataType so that the import
/// can convert with a range check, but nothing in the core depends on ONNX.
enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

/// One element of a string tensor in memory: a view of `size` bytes at `data` (any bytes, not
/// NUL-terminated). Tensors of kString hold these views, so that every kernel that only moves
/// elements (Reshape, Concat, Gather, Slice, Where, ...) moves strings as 16-byte values; the
/// bytes themselves live in storage that outlives every view of them: a TensorValue's
/// `string_bytes`, the caller's input tensor for the duration of a run, or the output storage of
/// the kernel that made them (see runtime/core/string_tensor.h and docs/string-tensors.md).
struct StringElement {
  const char* data = nullptr;
  uint64_t size = 0;
};
static_assert(sizeof(StringElement) == 16);

/// Bytes per element in memory; 0 for kUndefined; sizeof(StringElement) for kString (the
/// strings' own bytes are stored elsewhere).
size_t DataTypeSize(DataType type);

/// Lowercase name, e.g. "float32", "int64".
absl::string_view DataTypeName(DataType type);

/// Converts an integer type code (ONNX numbering) to a DataType; error for unknown codes.
absl::StatusOr<DataType> DataTypeFromCode(int32_t code);

using Shape = std::vector<int64_t>;

/// Number of elements of `shape` (1 for a scalar, i.e. an empty shape).
int64_t NumElements(const Shape& shape);

/// "[1,3,224,224]".
std::string ShapeToString(const Shape& shape);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_DATA_TYPE_H_
