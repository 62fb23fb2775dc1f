// A RepositoryModelLoad's `config` parameter: a JSON ModelConfig (protobuf's JSON mapping of
// model_config.proto) that replaces the model's configuration for that load.
#ifndef REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_
#define REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/model_config.h"

namespace reprise::server {

/// Parses `json` as an inference.ModelConfig, with the source "config override". Only the
/// syntax is checked here (INVALID_ARGUMENT for JSON that is not a ModelConfig: an unknown
/// field, a wrong type); the values go through the one validation path of every config
/// (config::ModelSettingsFromConfig, through ModelRepository::ResolveModel), which refuses the
/// fields Reprise does not implement by name and auto-completes what the config leaves out.
absl::StatusOr<config::ParsedModelConfig> ParseConfigOverride(absl::string_view json);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_
