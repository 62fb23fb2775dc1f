// Load-time helper: lifts large initializer payloads out of a serialised ONNX model before the
// protobuf parse, so that each weight is copied once (model bytes or file → TensorValue)
// instead of going through the proto's raw_data string first.
#ifndef REPRISE_RUNTIME_ENGINE_ONNX_WIRE_H_
#define REPRISE_RUNTIME_ENGINE_ONNX_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace reprise::runtime::engine {

/// Initializers whose raw_data is at least this large are lifted. Shape inference reads the
/// values of small constant inputs (Reshape's shape, Slice's starts, …); those stay in the proto.
inline constexpr size_t kMinLiftedBytes = 64 * 1024;

/// Where a lifted raw_data payload lies in the serialised model.
struct LiftedRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

/// A ModelProto serialisation with the large initializer payloads cut out.
struct LiftedModel {
  /// The model's bytes where every lifted raw_data holds one placeholder byte; parse these.
  std::string stripped;
  /// One entry per initializer of the main graph, in the order the parsed proto lists them
  /// (`graph.initializer(i)`): where its raw_data lies in the original bytes, or nullopt when
  /// the proto kept it.
  std::vector<std::optional<LiftedRange>> raw_data;
};

/// Scans `model` (a serialised onnx.ModelProto) on the wire format and lifts the raw_data of
/// every main-graph initializer of at least `min_bytes`. Follows protobuf's merge rules: the
/// graph field may occur several times (initializers concatenate) and a later raw_data field
/// replaces an earlier one. Returns nullopt when nothing is lifted or the bytes are not
/// well-formed wire data (the caller then parses `model` itself, and protobuf reports the
/// error). Never reads outside `model`.
std::optional<LiftedModel> LiftInitializerData(absl::string_view model,
                                               size_t min_bytes = kMinLiftedBytes);

/// The same for a model file: reads the open file `fd` (bytes [0, `size`)) with pread, through
/// a small buffer, skipping the lifted payloads (they are read later, straight into their
/// tensors). Also nullopt when a read fails or comes up short.
std::optional<LiftedModel> LiftInitializerDataFromFile(int fd, uint64_t size,
                                                       size_t min_bytes = kMinLiftedBytes);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_ONNX_WIRE_H_
