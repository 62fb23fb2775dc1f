#include "server/classification.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <system_error>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "config/server_config.h"
#include "runtime/base/status_macros.h"
#include "server/client_text.h"
#include "server/model_upload.h"

namespace reprise::server {
namespace {

using runtime::DataType;

template <typename T>
std::string Score(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return absl::StrFormat("%f", static_cast<double>(v));
  } else {
    return absl::StrCat(+v);  // promoted: 8-bit values print as numbers
  }
}

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

void AppendElement(absl::string_view s, std::string* out) {
  const uint32_t len = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&len), 4);  // little-endian host
  out->append(s.data(), s.size());
}

// Appends the top `k` of `count` values at `base` as serialized strings; returns how many.
template <typename T>
int64_t TopK(const char* base, int64_t count, int64_t k, const std::vector<std::string>* labels,
             std::string* out) {
  std::vector<T> values(static_cast<size_t>(count));
  std::memcpy(values.data(), base, static_cast<size_t>(count) * sizeof(T));
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  const int64_t n = std::min(k, count);
  // A strict weak order even with NaN (ranked lowest); ties by index.
  auto higher = [&values](int64_t a, int64_t b) {
    const T va = values[a];
    const T vb = values[b];
    const bool na = IsNan(va);
    const bool nb = IsNan(vb);
    if (na || nb) return na == nb ? a < b : nb;
    if (va != vb) return va > vb;
    return a < b;
  };
  std::partial_sort(order.begin(), order.begin() + n, order.end(), higher);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index = order[i];
    std::string s = absl::StrCat(Score(values[index]), ":", index);
    if (labels != nullptr && index < static_cast<int64_t>(labels->size()) &&
        !(*labels)[index].empty()) {
      absl::StrAppend(&s, ":", (*labels)[index]);
    }
    AppendElement(s, out);
  }
  return n;
}

template <typename T>
void ClassifyRows(const OutputTensor& output, int64_t rows, int64_t per_row, int64_t k,
                  const std::vector<std::string>* labels, std::string* out) {
  for (int64_t r = 0; r < rows; ++r) {
    TopK<T>(output.data.data() + r * per_row * static_cast<int64_t>(sizeof(T)), per_row, k, labels,
            out);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseLabels(absl::string_view text,
                                                     absl::string_view source) {
  if (static_cast<int64_t>(text.size()) > kMaxLabelFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("label file ", source, " has ", text.size(),
                                                   " bytes, over the ", kMaxLabelFileBytes,
                                                   " bytes a label file may have"));
  }
  std::vector<std::string> labels = absl::StrSplit(text, '\n');
  if (!labels.empty() && labels.back().empty()) labels.pop_back();
  for (std::string& l : labels) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
  }
  return labels;
}

absl::Status ReadLabelFiles(const std::string& model_dir, config::ModelSettings* settings) {
  for (config::TensorSettings& out : settings->outputs) {
    if (out.label_filename.empty()) continue;
    const std::string what = absl::StrCat("output ", QuotedName(out.name), " label_filename");
    RETURN_IF_ERROR(CheckRelativePath(out.label_filename, what));
    const std::string path = absl::StrCat(model_dir, "/", out.label_filename);
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      return absl::NotFoundError(
          absl::StrCat(what, ": cannot read ", QuotedName(path), ": ", ec.message()));
    }
    if (size > static_cast<uintmax_t>(kMaxLabelFileBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", QuotedName(path), " has ", size,
                                                     " bytes, over the ", kMaxLabelFileBytes,
                                                     " bytes a label file may have"));
    }
    ASSIGN_OR_RETURN(std::string text, config::ReadTextFile(path));
    ASSIGN_OR_RETURN(out.labels, ParseLabels(text, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<OutputTensor> Classify(const OutputTensor& output, int64_t k, bool batched,
                                      const std::vector<std::string>* labels,
                                      absl::string_view where) {
  const size_t element_size = runtime::DataTypeSize(output.dtype);
  switch (output.dtype) {
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFloat32:
    case DataType::kFloat64:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": class result not available for output due to unsupported type '",
                       runtime::DataTypeName(output.dtype), "'"));
  }
  const int64_t count = runtime::NumElements(output.shape);
  if (count < 0 ||
      static_cast<int64_t>(output.data.size()) != count * static_cast<int64_t>(element_size)) {
    return absl::InternalError(absl::StrCat(where, ": output has ", output.data.size(),
                                            " bytes for shape ",
                                            runtime::ShapeToString(output.shape)));
  }
  const bool by_row = batched && !output.shape.empty();
  const int64_t rows = by_row ? output.shape[0] : 1;
  const int64_t per_row = rows == 0 ? 0 : count / rows;
  OutputTensor result;
  result.name = output.name;
  result.dtype = DataType::kString;
  if (by_row) result.shape.push_back(rows);
  result.shape.push_back(std::min(k, per_row));
  switch (output.dtype) {
    case DataType::kUInt8:
      ClassifyRows<uint8_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kUInt16:
      ClassifyRows<uint16_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kUInt32:
      ClassifyRows<uint32_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kUInt64:
      ClassifyRows<uint64_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kInt8:
      ClassifyRows<int8_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kInt16:
      ClassifyRows<int16_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kInt32:
      ClassifyRows<int32_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kInt64:
      ClassifyRows<int64_t>(output, rows, per_row, k, labels, &result.data);
      break;
    case DataType::kFloat32:
      ClassifyRows<float>(output, rows, per_row, k, labels, &result.data);
      break;
    default:
      ClassifyRows<double>(output, rows, per_row, k, labels, &result.data);
      break;
  }
  return result;
}

}  // namespace reprise::server
