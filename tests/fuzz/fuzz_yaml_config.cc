// Fuzz target: bytes -> the server config parser and the model config parsers (config/): YAML
// and protobuf text format, validated with auto-complete from a fixed graph. The first byte
// picks the parser (bit 0: a model config; bit 1 with it: text format), so one corpus serves all.
#include <string>

#include "absl/strings/string_view.h"
#include "config/model_config.h"
#include "config/server_config.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {

int FuzzYamlConfig(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 3) == 3) {
    auto parsed = config::ParseModelConfigText(text, "fuzz/config.pbtxt");
    if (!parsed.ok()) return 0;
    config::GraphTensors graph;
    graph.inputs.push_back({"x", config::TensorType::kFp32, true, {-1, 4}});
    graph.outputs.push_back({"y", config::TensorType::kFp32, true, {-1, 4}});
    auto settings = config::ModelSettingsFromConfig(*parsed, "m", &graph);
    if (settings.ok()) (void)config::CaptureBuckets(*settings);
  } else if (data[0] & 1) {
    auto settings = config::ParseModelSettings(text, "fuzz/config.yaml", "m");
    if (settings.ok()) (void)config::CaptureBuckets(*settings);
  } else {
    auto server = config::ParseServerConfig(text, "fuzz/reprise.yaml");
    (void)server;
  }
  return 0;
}

}  // namespace reprise::fuzz
