#include "config/model_settings.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace reprise::config {
namespace {

constexpr std::array<std::pair<TensorType, absl::string_view>, 15> kTypeNames = {{
    {TensorType::kInvalid, "TYPE_INVALID"},
    {TensorType::kBool, "TYPE_BOOL"},
    {TensorType::kUInt8, "TYPE_UINT8"},
    {TensorType::kUInt16, "TYPE_UINT16"},
    {TensorType::kUInt32, "TYPE_UINT32"},
    {TensorType::kUInt64, "TYPE_UINT64"},
    {TensorType::kInt8, "TYPE_INT8"},
    {TensorType::kInt16, "TYPE_INT16"},
    {TensorType::kInt32, "TYPE_INT32"},
    {TensorType::kInt64, "TYPE_INT64"},
    {TensorType::kFp16, "TYPE_FP16"},
    {TensorType::kFp32, "TYPE_FP32"},
    {TensorType::kFp64, "TYPE_FP64"},
    {TensorType::kString, "TYPE_STRING"},
    {TensorType::kBf16, "TYPE_BF16"},
}};

}  // namespace

absl::string_view TensorTypeName(TensorType type) {
  for (const auto& [t, name] : kTypeNames) {
    if (t == type) return name;
  }
  return "TYPE_INVALID";
}

absl::StatusOr<TensorType> TensorTypeFromName(absl::string_view name) {
  for (const auto& [t, n] : kTypeNames) {
    if (n == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data type \"", name, "\""));
}

std::vector<int64_t> CaptureBuckets(const ModelSettings& settings) {
  if (settings.max_batch_size <= 0) return {};
  if (!settings.capture.buckets.empty()) return settings.capture.buckets;
  std::vector<int64_t> buckets;
  for (int64_t b = 1; b < settings.max_batch_size; b *= 2) buckets.push_back(b);
  buckets.push_back(settings.max_batch_size);
  return buckets;
}

}  // namespace reprise::config
