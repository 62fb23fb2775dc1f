// Model upload: the load parameters, the path checks and the private upload directory.
#include "server/model_upload.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_config_override.h"

namespace reprise::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ModelUploadTest, PathChecks) {
  EXPECT_TRUE(CheckRelativePath("1/model.onnx", "f").ok());
  EXPECT_TRUE(CheckRelativePath("labels.txt", "f").ok());
  EXPECT_TRUE(CheckRelativePath("1/sub/..data", "f").ok());
  for (const std::string& bad :
       std::vector<std::string>{"", "/etc/passwd", "../x", "1/../../x", "1//model.onnx",
                                "1/./model.onnx", "1/", ".", "..", std::string("a\0b", 3)}) {
    absl::Status s = CheckRelativePath(bad, "file override");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("file override"));
  }
  const std::string long_name(NAME_MAX + 1, 'n');
  absl::Status s = CheckRelativePath("1/" + long_name, "file override");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("failed to poll from model repository"));
  EXPECT_TRUE(CheckRelativePath("1/" + std::string(NAME_MAX, 'n'), "f").ok());
}

TEST(ModelUploadTest, LoadParameters) {
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> params;
  params["file:1/model.onnx"].set_bytes_param("onnx bytes");
  EXPECT_THAT(ReadLoadParameters(params).status().message(), HasSubstr("\"config\""));
  params["config"].set_string_param("{}");
  absl::StatusOr<LoadParameters> read = ReadLoadParameters(params);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read->config_json, "{}");
  ASSERT_EQ(read->files.size(), 1u);
  EXPECT_EQ(read->files[0].path, "1/model.onnx");
  EXPECT_EQ(read->files[0].content, "onnx bytes");

  params["file:../escape"].set_bytes_param("x");
  EXPECT_EQ(ReadLoadParameters(params).status().code(), absl::StatusCode::kInvalidArgument);
  params.erase("file:../escape");
  params["file:1/other"].set_string_param("not bytes");
  EXPECT_EQ(ReadLoadParameters(params).status().code(), absl::StatusCode::kInvalidArgument);
  params.erase("file:1/other");
  params["config"].set_int64_param(1);
  EXPECT_EQ(ReadLoadParameters(params).status().code(), absl::StatusCode::kInvalidArgument);
  params["config"].set_string_param("{}");
  params["unknown"].set_bool_param(true);
  EXPECT_THAT(ReadLoadParameters(params).status().message(), HasSubstr("\"unknown\""));
}

TEST(ModelUploadTest, UploadAreaWritesPrivateDirectoriesAndRemovesThem) {
  std::string root;
  {
    UploadArea::Options options;
    options.max_bytes = 16;
    options.max_uploads = 2;
    absl::StatusOr<std::unique_ptr<UploadArea>> area = UploadArea::Create(options);
    ASSERT_TRUE(area.ok()) << area.status();
    root = (*area)->root();
    struct stat st;
    ASSERT_EQ(stat(root.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);

    const std::vector<UploadedFile> files = {{"1/model.onnx", "12345678"}, {"labels.txt", "a\n"}};
    absl::StatusOr<std::string> dir = (*area)->Write(files);
    ASSERT_TRUE(dir.ok()) << dir.status();
    EXPECT_EQ(fs::path(*dir).parent_path(), fs::path(root));
    EXPECT_EQ(ReadAll(*dir + "/1/model.onnx"), "12345678");
    EXPECT_EQ(ReadAll(*dir + "/labels.txt"), "a\n");
    ASSERT_EQ(stat(dir->c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);

    // Over max_bytes (17 bytes in all): refused before anything is written.
    EXPECT_EQ((*area)
                  ->Write(std::vector<UploadedFile>{{"1/a", "123456789"}, {"1/b", "12345678"}})
                  .status()
                  .code(),
              absl::StatusCode::kResourceExhausted);
    // A file where a directory is needed fails, and leaves nothing behind.
    EXPECT_FALSE((*area)->Write(std::vector<UploadedFile>{{"1", "x"}, {"1/model.onnx", "y"}}).ok());
    EXPECT_EQ(std::distance(fs::directory_iterator(root), fs::directory_iterator()), 1);
    // Bad paths are refused here too (the area does not trust its caller).
    EXPECT_FALSE((*area)->Write(std::vector<UploadedFile>{{"../x", "y"}}).ok());

    absl::StatusOr<std::string> second = (*area)->Write(files);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ((*area)->Write(files).status().code(), absl::StatusCode::kResourceExhausted);
    (*area)->Remove(*dir);
    EXPECT_FALSE(fs::exists(*dir));
    (*area)->Remove("/etc");  // not one of its directories: ignored
    EXPECT_TRUE(fs::exists("/etc"));
    EXPECT_TRUE((*area)->Write(files).ok());
  }
  EXPECT_FALSE(fs::exists(root));  // the area made its root, and removes it
}

// An override as the repository validates it (no graph here, so nothing is auto-completed).
absl::StatusOr<config::ModelSettings> OverrideSettings(const std::string& json) {
  absl::StatusOr<config::ParsedModelConfig> parsed = ParseConfigOverride(json);
  if (!parsed.ok()) return parsed.status();
  return config::ModelSettingsFromConfig(*parsed, "m");
}

TEST(ModelConfigOverrideTest, JsonConfigBecomesSettings) {
  absl::StatusOr<config::ModelSettings> s = OverrideSettings(
      R"({"name": "m", "backend": "onnxruntime", "max_batch_size": 8,
          "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
          "output": [{"name": "y", "dataType": "TYPE_FP32", "dims": ["-1"],
                      "label_filename": "labels.txt"}],
          "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
          "version_policy": {"specific": {"versions": [1, 3]}},
          "dynamic_batching": {"preferred_batch_size": [2, 4],
                               "max_queue_delay_microseconds": 100}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->platform, "onnxruntime_onnx");  // backend: onnxruntime is a synonym
  EXPECT_EQ(s->max_batch_size, 8);
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].data_type, config::TensorType::kFp32);
  EXPECT_EQ(s->inputs[0].dims, std::vector<int64_t>{4});
  ASSERT_EQ(s->outputs.size(), 1u);
  EXPECT_EQ(s->outputs[0].dims, std::vector<int64_t>{-1});
  EXPECT_EQ(s->outputs[0].label_filename, "labels.txt");
  ASSERT_EQ(s->instance_groups.size(), 1u);
  EXPECT_EQ(s->instance_groups[0].count, 2);
  EXPECT_EQ(s->version_policy.kind, config::VersionPolicy::Kind::kSpecific);
  EXPECT_EQ(s->version_policy.versions, (std::vector<int64_t>{1, 3}));
  ASSERT_TRUE(s->dynamic_batching.has_value());
  EXPECT_EQ(s->dynamic_batching->preferred_batch_size, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s->dynamic_batching->max_queue_delay_microseconds, 100);

  EXPECT_TRUE(OverrideSettings("{}").ok());
}

TEST(ModelConfigOverrideTest, BadConfigsAreRefusedByName) {
  auto refused = [](const std::string& json, const std::string& fragment) {
    absl::StatusOr<config::ModelSettings> s = OverrideSettings(json);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(s.status().message(), HasSubstr(fragment)) << json;
    EXPECT_THAT(s.status().message(), HasSubstr("config override")) << json;
  };
  refused("{not json", "not a JSON ModelConfig");
  refused(R"({"max_batch_size": "eight"})", "not a JSON ModelConfig");
  refused(R"({"no_such_field": 1})", "no_such_field");
  refused(R"({"sequence_batching": {}})", "field \"sequence_batching\": is a Triton feature");
  refused(R"({"optimization": {"graph": {"level": 1}}})", "field \"optimization");
  refused(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1], "reshape": {}}]})",
          "field \"input[0].reshape\"");
  refused(R"({"instance_group": [{"count": 1, "kind": "KIND_CPU", "gpus": [0]}]})",
          "field \"instance_group[0].gpus\": names GPUs for a KIND_CPU group");
  refused(R"({"instance_group": [{"count": 1, "gpus": [-1]}]})", "instance_group[0].gpus");
  // Values config.yaml refuses are refused with its messages.
  refused(R"({"name": "other"})", "the model's directory is \"m\"");
  refused(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": []}]})",
          "rank must be at least 1");
  refused(R"({"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}})",
          "8 exceeds max_batch_size 4");
  refused(R"({"input": [{"name": "x", "dims": [1]}]})", "needs a \"data_type\"");
}

}  // namespace
}  // namespace reprise::server
