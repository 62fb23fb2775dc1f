// Replays the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) and every crash found so
// far (tests/fuzz/regressions/<target>/) through the same entry points libFuzzer drives, so
// that the normal and sanitizer builds check them without clang or libFuzzer.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_entry.h"

namespace reprise::fuzz {
namespace {

using Entry = int (*)(const uint8_t*, size_t);

// Feeds every file of tests/fuzz/<kind>/<target>/ to `entry`; returns how many there were.
int ReplayDir(const std::string& kind, const std::string& target, Entry entry) {
  const std::filesystem::path dir =
      std::filesystem::path(REPRISE_SOURCE_DIR) / "tests" / "fuzz" / kind / target;
  if (!std::filesystem::is_directory(dir)) return 0;
  int count = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    if (!file.is_regular_file()) continue;
    std::ifstream in(file.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    SCOPED_TRACE(file.path().string());
    EXPECT_EQ(entry(reinterpret_cast<const uint8_t*>(data.data()), data.size()), 0);
    ++count;
  }
  return count;
}

void Replay(const std::string& target, Entry entry) {
  EXPECT_GT(ReplayDir("corpus", target, entry), 0) << "no seed corpus for " << target;
  ReplayDir("regressions", target, entry);
}

TEST(FuzzReplayTest, InferRequest) { Replay("fuzz_infer_request", &FuzzInferRequest); }
TEST(FuzzReplayTest, OnnxModel) { Replay("fuzz_onnx_model", &FuzzOnnxModel); }
TEST(FuzzReplayTest, YamlConfig) { Replay("fuzz_yaml_config", &FuzzYamlConfig); }
TEST(FuzzReplayTest, Npy) { Replay("fuzz_npy", &FuzzNpy); }
TEST(FuzzReplayTest, HttpRequest) { Replay("fuzz_http_request", &FuzzHttpRequest); }

}  // namespace
}  // namespace reprise::fuzz
