#include "runtime/core/string_tensor.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace reprise::runtime {

TensorValue MakeStringTensor(Shape shape, std::span<const absl::string_view> elements) {
  TensorValue value;
  value.dtype = DataType::kString;
  value.shape = std::move(shape);
  size_t total = 0;
  for (absl::string_view e : elements) total += e.size();
  auto bytes = std::make_shared<std::string>();
  bytes->reserve(total);
  for (absl::string_view e : elements) bytes->append(e.data(), e.size());
  value.bytes.resize(elements.size() * sizeof(StringElement));
  size_t at = 0;
  for (size_t i = 0; i < elements.size(); ++i) {
    const StringElement e{bytes->data() + at, elements[i].size()};
    std::memcpy(value.bytes.data() + i * sizeof(StringElement), &e, sizeof(e));
    at += elements[i].size();
  }
  value.string_bytes = std::move(bytes);
  return value;
}

TensorValue CopyTensorValue(DataType dtype, Shape shape, const void* data) {
  const size_t count = static_cast<size_t>(NumElements(shape));
  if (dtype == DataType::kString) {
    std::vector<absl::string_view> elements(count);
    for (size_t i = 0; i < count; ++i) elements[i] = StringAt(data, static_cast<int64_t>(i));
    return MakeStringTensor(std::move(shape), elements);
  }
  TensorValue value{dtype, std::move(shape), {}};
  const size_t bytes = count * DataTypeSize(dtype);
  const auto* begin = static_cast<const uint8_t*>(data);
  if (bytes > 0) value.bytes.assign(begin, begin + bytes);
  return value;
}

absl::Status CheckStringTensor(const TensorValue& value, absl::string_view what) {
  if (value.dtype != DataType::kString) return absl::OkStatus();
  const size_t count = static_cast<size_t>(NumElements(value.shape));
  if (value.bytes.size() != count * sizeof(StringElement)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", value.bytes.size(), " bytes of string views for ", count,
                     " elements of shape ", ShapeToString(value.shape)));
  }
  const char* begin = value.string_bytes == nullptr ? nullptr : value.string_bytes->data();
  const size_t size = value.string_bytes == nullptr ? 0 : value.string_bytes->size();
  for (size_t i = 0; i < count; ++i) {
    const absl::string_view e = StringAt(value.bytes.data(), static_cast<int64_t>(i));
    if (e.empty()) continue;
    // Compared as addresses: the view must start inside the buffer and end by its end.
    const auto start = reinterpret_cast<uintptr_t>(e.data());
    const auto first = reinterpret_cast<uintptr_t>(begin);
    if (begin == nullptr || start < first || start - first > size ||
        e.size() > size - (start - first)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": string element ", i, " does not lie in the tensor's string bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace reprise::runtime
