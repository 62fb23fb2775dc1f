// A throw-away model repository on disk for tests.
#ifndef REPRISE_TESTS_SERVER_TEMP_REPO_H_
#define REPRISE_TESTS_SERVER_TEMP_REPO_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace reprise::server::testing {

class TempRepo {
 public:
  TempRepo() {
    std::string tmpl = ::testing::TempDir() + "/reprise_repo_XXXXXX";
    char* made = mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempRepo() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  /// Creates <repo>/<model>/<version>/model.onnx (an empty placeholder file).
  void AddVersion(const std::string& model, int64_t version) {
    const auto dir = std::filesystem::path(path_) / model / std::to_string(version);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "model.onnx") << "fake";
  }
  void WriteConfig(const std::string& model, const std::string& yaml) {
    const auto dir = std::filesystem::path(path_) / model;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.yaml") << yaml;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace reprise::server::testing

#endif  // REPRISE_TESTS_SERVER_TEMP_REPO_H_
