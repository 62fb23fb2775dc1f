// Fuzz target: bytes -> the server config parser and the model settings parser (config/).
// The first byte picks the parser, so that one corpus serves both.
#include <string>

#include "absl/strings/string_view.h"
#include "config/model_config.h"
#include "config/server_config.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {

int FuzzYamlConfig(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto settings = config::ParseModelSettings(text, "fuzz/config.yaml", "m");
    if (settings.ok()) (void)config::CaptureBuckets(*settings);
  } else {
    auto server = config::ParseServerConfig(text, "fuzz/reprise.yaml");
    (void)server;
  }
  return 0;
}

}  // namespace reprise::fuzz
