#include "server/model_config_override.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace reprise::server {

absl::StatusOr<config::ParsedModelConfig> ParseConfigOverride(absl::string_view json) {
  config::ParsedModelConfig parsed;
  parsed.locations = config::ConfigLocations("config override");
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(json), &parsed.config, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(parsed.locations.source(), ": not a JSON ModelConfig: ", status.ToString()));
  }
  return parsed;
}

}  // namespace reprise::server
