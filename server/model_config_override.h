// A RepositoryModelLoad's `config` parameter: a JSON ModelConfig (protobuf's JSON mapping of
// model_config.proto) that replaces the model's configuration for that load.
#ifndef REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_
#define REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/model_settings.h"
#include "model_config.pb.h"

namespace reprise::server {

/// Parses `json` as an inference.ModelConfig and turns it into the settings of `model_name`.
/// INVALID_ARGUMENT for JSON that is not a ModelConfig (unknown field, wrong type), for a field
/// Reprise does not implement (named, never ignored), and for every value config.yaml would
/// refuse (the same checks and messages, see ModelSettingsFromProto).
absl::StatusOr<config::ModelSettings> ParseConfigOverride(absl::string_view json,
                                                          absl::string_view model_name);

/// The settings a ModelConfig message describes, checked by config.yaml's parser: the message
/// is written as the equivalent config.yaml text and parsed as such, so both paths accept and
/// refuse the same values with the same messages (`source` names it; line numbers are those of
/// the equivalent YAML). Fields without a config.yaml equivalent are refused by name.
absl::StatusOr<config::ModelSettings> ModelSettingsFromProto(const inference::ModelConfig& proto,
                                                             absl::string_view source,
                                                             absl::string_view model_name);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_CONFIG_OVERRIDE_H_
