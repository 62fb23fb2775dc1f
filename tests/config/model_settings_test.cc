#include "config/model_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModelSettingsTest, EmptyGivesDefaults) {
  absl::StatusOr<ModelSettings> s = ParseModelSettings("", "m/config.yaml", "m");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "m");
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_TRUE(s->inputs.empty());
  EXPECT_TRUE(s->instance_groups.empty());
  EXPECT_EQ(s->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(s->version_policy.num_versions, 1);
  EXPECT_FALSE(s->dynamic_batching.has_value());
}

TEST(ModelSettingsTest, ReadsTritonFields) {
  const char* text = R"(
name: resnet
platform: onnx
max_batch_size: 8
max_queue_size: 16
input:
  - name: x
    data_type: TYPE_FP32
    dims: [3, -1, 224]
output:
  - {name: y, data_type: TYPE_STRING, dims: [1]}
instance_group:
  - {count: 3, kind: KIND_CPU}
version_policy:
  specific: {versions: [1, 3]}
dynamic_batching:
  preferred_batch_size: [4, 8]
  max_queue_delay_microseconds: 100
)";
  absl::StatusOr<ModelSettings> s = ParseModelSettings(text, "resnet/config.yaml", "resnet");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_batch_size, 8);
  EXPECT_EQ(s->max_queue_size, 16);
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_EQ(s->inputs[0].data_type, TensorType::kFp32);
  EXPECT_THAT(s->inputs[0].dims, ElementsAre(3, -1, 224));
  ASSERT_EQ(s->outputs.size(), 1u);
  EXPECT_EQ(s->outputs[0].data_type, TensorType::kString);
  ASSERT_EQ(s->instance_groups.size(), 1u);
  EXPECT_EQ(s->instance_groups[0].count, 3);
  EXPECT_EQ(s->instance_groups[0].kind, "KIND_CPU");
  EXPECT_EQ(s->version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_THAT(s->version_policy.versions, ElementsAre(1, 3));
  ASSERT_TRUE(s->dynamic_batching.has_value());
  EXPECT_THAT(s->dynamic_batching->preferred_batch_size, ElementsAre(4, 8));
  EXPECT_EQ(s->dynamic_batching->max_queue_delay_microseconds, 100);
}

TEST(ModelSettingsTest, VersionPolicyForms) {
  absl::StatusOr<ModelSettings> latest =
      ParseModelSettings("version_policy: {latest: {num_versions: 2}}", "c", "m");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(latest->version_policy.num_versions, 2);
  absl::StatusOr<ModelSettings> all = ParseModelSettings("version_policy: {all: {}}", "c", "m");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->version_policy.kind, VersionPolicy::Kind::kAll);
  absl::StatusOr<ModelSettings> two =
      ParseModelSettings("version_policy: {all: {}, latest: {}}", "c", "m");
  EXPECT_FALSE(two.ok());
}

TEST(ModelSettingsTest, EmptyDynamicBatchingTurnsItOn) {
  absl::StatusOr<ModelSettings> s =
      ParseModelSettings("max_batch_size: 4\ndynamic_batching: {}\n", "c", "m");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->dynamic_batching.has_value());
  EXPECT_TRUE(s->dynamic_batching->preferred_batch_size.empty());
}

TEST(ModelSettingsTest, UnknownKeyNamesKeyAndLine) {
  const char* text = "input:\n  - name: x\n    data_type: TYPE_FP32\n    dim: [1]\n";
  absl::StatusOr<ModelSettings> s = ParseModelSettings(text, "m/config.yaml", "m");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("m/config.yaml line 4"));
  EXPECT_THAT(s.status().message(), HasSubstr("unknown key \"input[0].dim\""));
}

TEST(ModelSettingsTest, WrongTypesNameKeyAndLine) {
  absl::StatusOr<ModelSettings> batch =
      ParseModelSettings("name: m\nmax_batch_size: lots\n", "c.yaml", "m");
  ASSERT_FALSE(batch.ok());
  EXPECT_THAT(batch.status().message(), HasSubstr("c.yaml line 2"));
  EXPECT_THAT(batch.status().message(), HasSubstr("\"max_batch_size\""));

  absl::StatusOr<ModelSettings> dims = ParseModelSettings(
      "input:\n  - {name: x, data_type: TYPE_FP32, dims: [1, two]}\n", "c.yaml", "m");
  ASSERT_FALSE(dims.ok());
  EXPECT_THAT(dims.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(dims.status().message(), HasSubstr("input[0].dims"));

  absl::StatusOr<ModelSettings> type =
      ParseModelSettings("output:\n  - {name: y, data_type: FP32, dims: [1]}\n", "c.yaml", "m");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("unknown data type \"FP32\""));
}

TEST(ModelSettingsTest, BadValues) {
  EXPECT_THAT(ParseModelSettings("name: other\n", "c", "m").status().message(),
              HasSubstr("directory is \"m\""));
  EXPECT_THAT(ParseModelSettings("input: [{name: x, data_type: TYPE_FP32, dims: []}]", "c", "m")
                  .status()
                  .message(),
              HasSubstr("rank must be at least 1"));
  EXPECT_THAT(
      ParseModelSettings("input: [{name: x, data_type: TYPE_FP32}]", "c", "m").status().message(),
      HasSubstr("needs \"dims\""));
  EXPECT_THAT(ParseModelSettings("input: [{name: x, data_type: TYPE_FP32, dims: [1]},"
                                 " {name: x, data_type: TYPE_FP32, dims: [1]}]",
                                 "c", "m")
                  .status()
                  .message(),
              HasSubstr("declared twice"));
  EXPECT_THAT(ParseModelSettings("max_batch_size: 2\ndynamic_batching: "
                                 "{preferred_batch_size: [4]}",
                                 "c", "m")
                  .status()
                  .message(),
              HasSubstr("exceeds max_batch_size 2"));
  EXPECT_THAT(ParseModelSettings("instance_group: [{count: 0}]", "c", "m").status().message(),
              HasSubstr("instance_group[0].count"));
}

TEST(ModelSettingsTest, ReadsTheSchedulingAndCaptureKeys) {
  absl::StatusOr<ModelSettings> s = ParseModelSettings(R"(
max_batch_size: 8
dynamic_batching:
  preferred_batch_size: [4, 8]
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy: {max_queue_size: 16, default_timeout_microseconds: 5000}
capture: {buckets: [2, 8], warmup: true, max_instances_per_stream: 3}
)",
                                                       "c", "m");
  ASSERT_TRUE(s.ok()) << s.status();
  const DynamicBatching& b = *s->dynamic_batching;
  EXPECT_FALSE(b.max_queue_delay_microseconds.has_value());  // the server's default applies
  EXPECT_EQ(b.priority_levels, 3);
  EXPECT_EQ(b.default_priority_level, 2);
  EXPECT_EQ(b.default_queue_policy.max_queue_size, 16);
  EXPECT_EQ(b.default_queue_policy.default_timeout_microseconds, 5000);
  EXPECT_THAT(s->capture.buckets, ElementsAre(2, 8));
  EXPECT_EQ(s->capture.warmup, true);
  EXPECT_EQ(s->capture.max_instances_per_stream, 3);
  EXPECT_THAT(CaptureBuckets(*s), ElementsAre(2, 8));
}

TEST(ModelSettingsTest, DefaultBucketsArePowersOfTwoAndTheMax) {
  absl::StatusOr<ModelSettings> s = ParseModelSettings("max_batch_size: 6\n", "c", "m");
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(CaptureBuckets(*s), ElementsAre(1, 2, 4, 6));
  s = ParseModelSettings("", "c", "m");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(CaptureBuckets(*s).empty());  // no batch dimension: no buckets
}

TEST(ModelSettingsTest, BadSchedulingAndCaptureValues) {
  auto error = [](const std::string& yaml) {
    return std::string(ParseModelSettings(yaml, "c", "m").status().message());
  };
  EXPECT_THAT(error("max_batch_size: 8\ncapture: {buckets: [4, 2]}"), HasSubstr("ascending"));
  EXPECT_THAT(error("max_batch_size: 8\ncapture: {buckets: [16]}"),
              HasSubstr("16 exceeds max_batch_size 8"));
  EXPECT_THAT(error("capture: {buckets: [1]}"), HasSubstr("needs max_batch_size > 0"));
  EXPECT_THAT(error("max_batch_size: 8\ndynamic_batching: {priority_levels: 2, "
                    "default_priority_level: 3}"),
              HasSubstr("exceeds priority_levels 2"));
  EXPECT_THAT(error("dynamic_batching: {default_queue_policy: {timeout_action: DELAY}}"),
              HasSubstr("dynamic_batching.default_queue_policy.timeout_action"));
}

TEST(ModelSettingsTest, TypeNamesRoundTrip) {
  for (int i = 1; i <= 14; ++i) {
    const auto type = static_cast<TensorType>(i);
    absl::StatusOr<TensorType> back = TensorTypeFromName(TensorTypeName(type));
    ASSERT_TRUE(back.ok()) << i;
    EXPECT_EQ(*back, type);
  }
  EXPECT_FALSE(TensorTypeFromName("TYPE_FLOAT").ok());
}

}  // namespace
}  // namespace reprise::config
