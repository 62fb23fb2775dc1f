// KServe's serialized BYTES form (Triton's raw format for string tensors) and its conversion to
// and from the engine's string tensors (runtime/core/string_tensor.h).
//
// The serialized form holds, per element, a 4-byte little-endian length and then that many
// bytes; raw_input_contents / raw_output_contents carry it, and decoded requests keep BYTES
// inputs in it (InputTensor::data).
#ifndef REPRISE_SERVER_BYTES_TENSOR_H_
#define REPRISE_SERVER_BYTES_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/kernel.h"

namespace reprise::server {

/// Splits the serialized form `data` into its elements, appending views of them (into `data`)
/// to `elements` when it is not null; returns the element count. Every length is checked
/// against the bytes that remain before anything is taken from it, so a claimed length never
/// sizes anything. INVALID_ARGUMENT "BYTES element <i>: ..." when the form is malformed (a
/// truncated length prefix, a length past the end).
absl::StatusOr<int64_t> SplitSerializedStrings(absl::string_view data,
                                               std::vector<absl::string_view>* elements);

/// Appends `element` in the serialized form to `out`. INVALID_ARGUMENT when it is 4 GiB or
/// longer (the length prefix cannot hold it).
absl::Status AppendSerializedString(absl::string_view element, std::string* out);

/// A string tensor of `shape` from the serialized form `data`, which must hold exactly
/// NumElements(shape) elements (INVALID_ARGUMENT otherwise). The tensor owns copies of them.
absl::StatusOr<runtime::TensorValue> StringTensorFromSerialized(const runtime::Shape& shape,
                                                                absl::string_view data);

/// Elements [begin, begin + count) of string tensor memory (StringElement views) in the
/// serialized form. `elements` is borrowed for the call.
absl::StatusOr<std::string> SerializeStrings(const void* elements, int64_t begin, int64_t count);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_BYTES_TENSOR_H_
