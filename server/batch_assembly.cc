#include "server/batch_assembly.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"
#include "runtime/core/string_tensor.h"
#include "server/bytes_tensor.h"

namespace reprise::server {

using runtime::engine::NamedTensor;

std::string BatchKey(std::span<const InputTensor> inputs) {
  std::string key;
  for (const InputTensor& in : inputs) {
    absl::StrAppend(&key, in.name, ":", static_cast<int>(in.dtype), "[");
    for (size_t d = 1; d < in.shape.size(); ++d) absl::StrAppend(&key, in.shape[d], ",");
    absl::StrAppend(&key, "];");
  }
  return key;
}

namespace {

// AssembleBatch for string input `i`: the requests' elements in order, then copies of the first
// row for the padding rows (not empty strings, which a model that parses its strings would
// refuse). Each request's data must hold exactly its rows' elements.
absl::StatusOr<NamedTensor> AssembleStrings(const std::vector<RequestInputs>& requests, size_t i,
                                            int64_t row_elements, int64_t padded_rows) {
  const InputTensor& model_input = requests.front()[i];
  std::optional<int64_t> total = runtime::CheckedByteSize(padded_rows, row_elements);
  if (!total.has_value()) {
    return absl::ResourceExhaustedError(absl::StrCat("input \"", model_input.name,
                                                     "\": ", padded_rows, " rows of ", row_elements,
                                                     " strings overflow"));
  }
  std::vector<absl::string_view> elements;
  for (const RequestInputs& r : requests) {
    const InputTensor& in = r[i];
    absl::StatusOr<int64_t> count = SplitSerializedStrings(in.data, &elements);
    std::optional<int64_t> expected = in.shape.empty() || in.shape[0] < 0
                                          ? std::nullopt
                                          : runtime::CheckedByteSize(in.shape[0], row_elements);
    if (!count.ok() || !expected.has_value() || *count != *expected ||
        static_cast<int64_t>(elements.size()) > *total) {
      return absl::InternalError(
          absl::StrCat("input \"", in.name, "\" of shape ", runtime::ShapeToString(in.shape),
                       " does not hold whole rows of ", row_elements, " strings"));
    }
  }
  const size_t real = elements.size();
  if (real < static_cast<size_t>(row_elements) && real < static_cast<size_t>(*total)) {
    return absl::InternalError(
        absl::StrCat("input \"", model_input.name, "\": no row to pad the batch with"));
  }
  for (size_t e = real; e < static_cast<size_t>(*total); ++e) {
    elements.push_back(elements[(e - real) % static_cast<size_t>(row_elements)]);
  }
  runtime::Shape shape = model_input.shape;
  shape[0] = padded_rows;
  return NamedTensor{model_input.name, runtime::MakeStringTensor(std::move(shape), elements)};
}

}  // namespace

absl::StatusOr<std::vector<NamedTensor>> AssembleBatch(const std::vector<RequestInputs>& requests,
                                                       int64_t padded_rows) {
  if (requests.empty()) return absl::InternalError("assembling a batch of no request");
  const RequestInputs& first = requests.front();
  std::vector<NamedTensor> tensors(first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    const InputTensor& model_input = first[i];
    if (model_input.shape.empty()) {
      return absl::InternalError(
          absl::StrCat("input \"", model_input.name, "\" has no batch dimension to batch on"));
    }
    // The bytes of one row come from the shape (checked), never from the data: every request's
    // data must then be exactly its rows, so that no buffer is sized or read past its end.
    const runtime::Shape row_shape(model_input.shape.begin() + 1, model_input.shape.end());
    std::optional<int64_t> row_elements = runtime::CheckedElementCount(row_shape);
    std::optional<int64_t> row_bytes =
        row_elements.has_value()
            ? runtime::CheckedByteSize(
                  *row_elements, static_cast<int64_t>(runtime::DataTypeSize(model_input.dtype)))
            : std::nullopt;
    if (model_input.dtype == runtime::DataType::kString && row_elements.has_value()) {
      ASSIGN_OR_RETURN(tensors[i], AssembleStrings(requests, i, *row_elements, padded_rows));
      continue;
    }
    if (!row_bytes.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", model_input.name, "\" of shape ",
                                                     runtime::ShapeToString(model_input.shape),
                                                     " cannot be batched"));
    }
    int64_t rows = 0;
    for (const RequestInputs& r : requests) {
      const InputTensor& in = r[i];
      std::optional<int64_t> bytes = in.shape.empty() || in.shape[0] < 0
                                         ? std::nullopt
                                         : runtime::CheckedByteSize(in.shape[0], *row_bytes);
      if (!bytes.has_value() || static_cast<int64_t>(in.data.size()) != *bytes ||
          !runtime::CheckedAdd(rows, in.shape[0], &rows)) {
        return absl::InternalError(absl::StrCat(
            "input \"", in.name, "\" of shape ", runtime::ShapeToString(in.shape), " has ",
            in.data.size(), " bytes, not a whole number of ", *row_bytes, "-byte rows"));
      }
    }
    if (rows > padded_rows) {
      return absl::InternalError(absl::StrCat("batch of ", rows, " rows padded to ", padded_rows));
    }
    std::optional<int64_t> total = runtime::CheckedByteSize(padded_rows, *row_bytes);
    if (!total.has_value()) {
      return absl::ResourceExhaustedError(absl::StrCat("input \"", model_input.name,
                                                       "\": ", padded_rows, " rows of ", *row_bytes,
                                                       " bytes overflow"));
    }
    NamedTensor& t = tensors[i];
    t.name = model_input.name;
    t.value.dtype = model_input.dtype;
    t.value.shape = model_input.shape;
    t.value.shape[0] = padded_rows;
    // Zero-filled: the padding rows stay zero.
    t.value.bytes.assign(static_cast<size_t>(*total), 0);
    size_t offset = 0;
    for (const RequestInputs& r : requests) {
      if (!r[i].data.empty())
        std::memcpy(t.value.bytes.data() + offset, r[i].data.data(), r[i].data.size());
      offset += r[i].data.size();
    }
  }
  return tensors;
}

absl::StatusOr<OutputTensor> CopyOutputRows(const runtime::engine::PlanTensor& output,
                                            int64_t batch_rows, int64_t row_offset, int64_t rows) {
  OutputTensor t;
  t.name = output.name;
  t.dtype = output.dtype;
  t.shape = output.shape;
  const int64_t elements = runtime::NumElements(output.shape);
  if (batch_rows < 0) {  // the whole output
    row_offset = 0;
    rows = 1;
    batch_rows = 1;
  } else {
    if (output.shape.empty() || output.shape[0] != batch_rows) {
      return absl::InternalError(absl::StrCat(
          "output \"", output.name, "\" has shape ", runtime::ShapeToString(output.shape),
          ", not a first dimension of the batch's ", batch_rows, " rows"));
    }
    if (row_offset < 0 || rows < 0 || row_offset > batch_rows - rows) {
      return absl::InternalError(absl::StrCat("rows ", row_offset, " to ", row_offset + rows,
                                              " of output \"", output.name, "\" with ", batch_rows,
                                              " rows"));
    }
    t.shape[0] = rows;
  }
  const int64_t row_elements = batch_rows > 0 ? elements / batch_rows : 0;
  if (output.dtype == runtime::DataType::kString) {
    ASSIGN_OR_RETURN(t.data,
                     SerializeStrings(output.data, row_offset * row_elements, rows * row_elements));
    return t;
  }
  const size_t row_bytes = batch_rows > 0 ? output.bytes / static_cast<size_t>(batch_rows) : 0;
  const auto* begin =
      reinterpret_cast<const char*>(output.data) + row_bytes * static_cast<size_t>(row_offset);
  t.data.assign(begin, row_bytes * static_cast<size_t>(rows));
  return t;
}

}  // namespace reprise::server
