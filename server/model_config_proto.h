// Turns a model's settings (config/) and the loaded model's tensors into Triton's
// inference.ModelConfig message, for the ModelConfig RPC.
#ifndef REPRISE_SERVER_MODEL_CONFIG_PROTO_H_
#define REPRISE_SERVER_MODEL_CONFIG_PROTO_H_

#include "config/model_settings.h"
#include "model_config.pb.h"
#include "runtime/core/data_type.h"
#include "server/model_backend.h"

namespace reprise::server {

/// model_config.proto's DataType for a tensor type (TYPE_INVALID for kUndefined).
inference::DataType ToProtoDataType(runtime::DataType type);

/// The settings as a ModelConfig message. Inputs and outputs that config.yaml does not declare
/// come from `signature` (without the batch dimension when max_batch_size > 0).
inference::ModelConfig ToModelConfigProto(const config::ModelSettings& settings,
                                          const ModelSignature& signature);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_CONFIG_PROTO_H_
