// NumPy .npy files (format versions 1.0 to 3.0, little-endian, C order) ↔ host tensors.
//
// The format: the magic "\x93NUMPY", a major and a minor version byte, the header length
// (uint16 little-endian in 1.0, uint32 in 2.0 and 3.0), an ASCII Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), } padded with spaces and a final
// '\n' so that the data starts at a multiple of 64 bytes, then the raw row-major data.
#ifndef REPRISE_RUNTIME_ENGINE_NPY_H_
#define REPRISE_RUNTIME_ENGINE_NPY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime::engine {

/// Parses .npy bytes. Supported descr: bool, (u)int8/16/32/64, float16/32/64, little-endian or
/// byte-order-free; Fortran order, big-endian and object arrays are errors naming the file's
/// descr. `what` names the source in messages.
absl::StatusOr<TensorValue> ParseNpy(absl::string_view bytes, absl::string_view what = "npy");

/// Serialises a tensor as .npy (version 1.0). Error for element types NumPy has no code for
/// (bfloat16, string).
absl::StatusOr<std::string> SerializeNpy(const TensorValue& tensor);

absl::StatusOr<TensorValue> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const std::string& path, const TensorValue& tensor);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_NPY_H_
