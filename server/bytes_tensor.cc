#include "server/bytes_tensor.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/string_tensor.h"

namespace reprise::server {

absl::StatusOr<int64_t> SplitSerializedStrings(absl::string_view data,
                                               std::vector<absl::string_view>* elements) {
  int64_t count = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("BYTES element ", count, ": truncated 4-byte length prefix at byte ", pos));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + pos);
    const uint32_t len = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
    pos += 4;
    if (len > data.size() - pos) {
      return absl::InvalidArgumentError(absl::StrCat("BYTES element ", count, " claims ", len,
                                                     " bytes but only ", data.size() - pos,
                                                     " remain"));
    }
    if (elements != nullptr) elements->push_back(data.substr(pos, len));
    pos += len;
    ++count;
  }
  return count;
}

absl::Status AppendSerializedString(absl::string_view element, std::string* out) {
  if (element.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a BYTES element of ", element.size(), " bytes is over 4 GiB"));
  }
  const auto len = static_cast<uint32_t>(element.size());
  const char prefix[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                          static_cast<char>((len >> 16) & 0xff),
                          static_cast<char>((len >> 24) & 0xff)};
  out->append(prefix, 4);
  out->append(element.data(), element.size());
  return absl::OkStatus();
}

absl::StatusOr<runtime::TensorValue> StringTensorFromSerialized(const runtime::Shape& shape,
                                                                absl::string_view data) {
  const int64_t expected = runtime::NumElements(shape);
  std::vector<absl::string_view> elements;
  absl::StatusOr<int64_t> count = SplitSerializedStrings(data, &elements);
  if (!count.ok()) return count.status();
  if (*count != expected) {
    return absl::InvalidArgumentError(absl::StrCat(*count, " BYTES elements, expected ", expected,
                                                   " for shape ", runtime::ShapeToString(shape)));
  }
  return runtime::MakeStringTensor(shape, elements);
}

absl::StatusOr<std::string> SerializeStrings(const void* elements, int64_t begin, int64_t count) {
  std::string out;
  size_t total = 0;
  for (int64_t i = begin; i < begin + count; ++i) {
    total += 4 + runtime::StringAt(elements, i).size();
  }
  out.reserve(total);
  for (int64_t i = begin; i < begin + count; ++i) {
    if (absl::Status s = AppendSerializedString(runtime::StringAt(elements, i), &out); !s.ok()) {
      return s;
    }
  }
  return out;
}

}  // namespace reprise::server
