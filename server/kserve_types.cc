#include "server/kserve_types.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace reprise::server {
namespace {

using runtime::DataType;

constexpr std::array<std::pair<DataType, absl::string_view>, 14> kNames = {{
    {DataType::kBool, "BOOL"},
    {DataType::kUInt8, "UINT8"},
    {DataType::kUInt16, "UINT16"},
    {DataType::kUInt32, "UINT32"},
    {DataType::kUInt64, "UINT64"},
    {DataType::kInt8, "INT8"},
    {DataType::kInt16, "INT16"},
    {DataType::kInt32, "INT32"},
    {DataType::kInt64, "INT64"},
    {DataType::kFloat16, "FP16"},
    {DataType::kFloat32, "FP32"},
    {DataType::kFloat64, "FP64"},
    {DataType::kString, "BYTES"},
    {DataType::kBFloat16, "BF16"},
}};

}  // namespace

absl::string_view KServeDatatypeName(DataType type) {
  for (const auto& [t, name] : kNames) {
    if (t == type) return name;
  }
  return "";
}

absl::StatusOr<DataType> DataTypeFromKServe(absl::string_view name) {
  for (const auto& [t, n] : kNames) {
    if (n == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown datatype \"", name, "\""));
}

}  // namespace reprise::server
