// Conversion between ONNX TensorProto and host tensors (runtime::TensorValue).
#ifndef REPRISE_RUNTIME_ENGINE_TENSOR_PROTO_H_
#define REPRISE_RUNTIME_ENGINE_TENSOR_PROTO_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime::engine {

/// A raw_data payload that the protobuf parse left out: `size` bytes, in memory at `data`, or
/// (when `data` is null) copied by `read` into a buffer of `size` bytes.
struct LiftedRawData {
  uint64_t size = 0;
  const char* data = nullptr;
  std::function<absl::Status(uint8_t* out)> read;
};

/// Converts `proto` to a host tensor: raw_data or the typed fields (float_data, int32_data,
/// int64_data, double_data, uint64_data), every fixed-size element type, and strings from
/// string_data (their count must match the dims). Tensors stored as
/// external data are read from files relative to `base_dir`; when `base_dir` is empty (a model
/// loaded from bytes) external data is an error.
/// Errors name the tensor. `lifted`, when not null, replaces `proto.raw_data()`: an
/// initializer whose payload LiftInitializerData (onnx_wire.h) cut out of the serialised model.
/// Its bytes are copied; it need only live for the call.
absl::StatusOr<TensorValue> TensorFromProto(const onnx::TensorProto& proto,
                                            const std::string& base_dir,
                                            const LiftedRawData* lifted = nullptr);

/// Reads every external-data tensor of `model`'s main graph (initializers and tensor
/// attributes) into its raw_data, from files relative to `base_dir`, so that the checker and
/// the conversion see plain tensors. Error naming the tensor and the file when one is missing,
/// or when `base_dir` is empty (a model given as bytes).
absl::Status InlineExternalData(onnx::ModelProto* model, const std::string& base_dir);

/// Converts a host tensor to a TensorProto with raw_data (string_data for strings).
onnx::TensorProto TensorToProto(const TensorValue& tensor, const std::string& name);

/// Reads a serialised TensorProto file (the ONNX test data's input_N.pb / output_N.pb).
absl::StatusOr<TensorValue> ReadTensorProtoFile(const std::string& path, std::string* name);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_TENSOR_PROTO_H_
