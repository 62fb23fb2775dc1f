#include "server/batch_assembly.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
    size_t total = 0;
    int64_t rows = 0;
    for (const RequestInputs& r : requests) {
      total += r[i].data.size();
      rows += r[i].shape[0];
    }
    if (rows > padded_rows) {
      return absl::InternalError(absl::StrCat("batch of ", rows, " rows padded to ", padded_rows));
    }
    const size_t row_bytes = rows > 0 ? total / static_cast<size_t>(rows) : 0;
    NamedTensor& t = tensors[i];
    t.name = model_input.name;
    t.value.dtype = model_input.dtype;
    t.value.shape = model_input.shape;
    t.value.shape[0] = padded_rows;
    // Zero-filled: the padding rows stay zero.
    t.value.bytes.assign(row_bytes * static_cast<size_t>(padded_rows), 0);
    size_t offset = 0;
    for (const RequestInputs& r : requests) {
      if (!r[i].data.empty())
        std::memcpy(t.value.bytes.data() + offset, r[i].data.data(), r[i].data.size());
      offset += r[i].data.size();
    }
  }
  return tensors;
}

absl::StatusOr<std::vector<OutputTensor>> SliceOutputs(const std::vector<NamedTensor>& outputs,
                                                       std::span<const std::string> wanted,
                                                       int64_t batch_rows, int64_t row_offset,
                                                       int64_t rows) {
  std::vector<OutputTensor> out;
  out.reserve(wanted.size());
  for (const std::string& name : wanted) {
    const NamedTensor* found = nullptr;
    for (const NamedTensor& t : outputs) {
      if (t.name == name) found = &t;
    }
    if (found == nullptr) {
      return absl::InternalError(absl::StrCat("the engine returned no output \"", name, "\""));
    }
    const runtime::TensorValue& v = found->value;
    if (v.shape.empty() || v.shape[0] != batch_rows) {
      return absl::InternalError(
          absl::StrCat("output \"", name, "\" has shape [", absl::StrJoin(v.shape, ","),
                       "], not a first dimension of the batch's ", batch_rows, " rows"));
    }
    const size_t row_bytes = batch_rows > 0 ? v.bytes.size() / static_cast<size_t>(batch_rows) : 0;
    OutputTensor t;
    t.name = name;
    t.dtype = v.dtype;
    t.shape = v.shape;
    t.shape[0] = rows;
    const auto* begin =
        reinterpret_cast<const char*>(v.bytes.data()) + row_bytes * static_cast<size_t>(row_offset);
    t.data.assign(begin, row_bytes * static_cast<size_t>(rows));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace reprise::server
