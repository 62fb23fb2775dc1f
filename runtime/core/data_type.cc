#include "runtime/core/data_type.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reprise::runtime {

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUInt32:
      return 4;
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
    case DataType::kFloat64:
    case DataType::kUInt64:
      return 8;
    case DataType::kString:
      return sizeof(StringElement);
    case DataType::kUndefined:
      return 0;
  }
  return 0;
}

absl::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kUndefined:
      return "undefined";
    case DataType::kFloat32:
      return "float32";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat64:
      return "float64";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

absl::StatusOr<DataType> DataTypeFromCode(int32_t code) {
  switch (code) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 16:
      return static_cast<DataType>(code);
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown element type code ", code));
  }
}

// Never undefined behaviour: 0 when a dimension is 0, -1 when the product overflows int64.
// Sizes from outside data are checked with runtime/core/checked_size.h before anything relies
// on this.
int64_t NumElements(const Shape& shape) {
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace reprise::runtime
