// config.pbtxt and config.yaml through the one validation path, refused Triton features, and
// Triton's auto-complete from a graph.
#include "config/model_config.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<ModelSettings> FromText(const std::string& text, const GraphTensors* graph = nullptr,
                                       AutoComplete auto_complete = {}) {
  absl::StatusOr<ParsedModelConfig> parsed = ParseModelConfigText(text, "m/config.pbtxt");
  if (!parsed.ok()) return parsed.status();
  return ModelSettingsFromConfig(*parsed, "m", graph, auto_complete);
}

std::string TextError(const std::string& text) {
  absl::StatusOr<ModelSettings> s = FromText(text);
  EXPECT_FALSE(s.ok()) << text;
  return std::string(s.status().message());
}

std::string YamlError(const std::string& yaml) {
  absl::StatusOr<ModelSettings> s = ParseModelSettings(yaml, "m/config.yaml", "m");
  EXPECT_FALSE(s.ok()) << yaml;
  return std::string(s.status().message());
}

TEST(ModelConfigTextTest, ReadsTritonConfig) {
  absl::StatusOr<ModelSettings> s = FromText(R"pb(
    name: "m"
    platform: "onnxruntime_onnx"
    max_batch_size: 8 input
    [ {
      name: "x"
      data_type: TYPE_FP32
      dims: [ 3, -1 ]
    }] output
    [ {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 10 ]
      label_filename: "labels.txt"
    }] instance_group
    [ { count: 3 kind: KIND_CPU }]
    version_policy { specific { versions: [ 1, 3 ] } }
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ]
      max_queue_delay_microseconds: 100
      default_queue_policy { max_queue_size: 16 }
    }
    response_cache { enable: false }
    capture {
      buckets: [ 2, 8 ]
      warmup: true
    }
  )pb");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_batch_size, 8);
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].data_type, TensorType::kFp32);
  EXPECT_THAT(s->inputs[0].dims, ElementsAre(3, -1));
  EXPECT_EQ(s->outputs[0].label_filename, "labels.txt");
  ASSERT_EQ(s->instance_groups.size(), 1u);
  EXPECT_EQ(s->instance_groups[0].count, 3);
  EXPECT_EQ(s->instance_groups[0].kind, "KIND_CPU");
  EXPECT_EQ(s->version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_THAT(s->version_policy.versions, ElementsAre(1, 3));
  ASSERT_TRUE(s->dynamic_batching.has_value());
  EXPECT_THAT(s->dynamic_batching->preferred_batch_size, ElementsAre(4, 8));
  EXPECT_EQ(s->dynamic_batching->max_queue_delay_microseconds, 100);
  EXPECT_EQ(s->dynamic_batching->default_queue_policy.max_queue_size, 16);
  EXPECT_THAT(s->capture.buckets, ElementsAre(2, 8));
  EXPECT_EQ(s->capture.warmup, true);
}

TEST(ModelConfigTextTest, SyntaxErrorsNameLineAndColumn) {
  const std::string e = TextError("name: \"m\"\nmax_batch_size: lots\n");
  EXPECT_THAT(e, HasSubstr("m/config.pbtxt line 2 column 17: Expected integer"));
  EXPECT_THAT(TextError("input [ { name: \"x\" data_type: TYPE_FLOAT32 dims: [1] } ]"),
              HasSubstr("TYPE_FLOAT32"));
  EXPECT_THAT(TextError("max_batch_size: 4\nfrobnicate: 1\n"),
              HasSubstr("m/config.pbtxt line 2: unknown field"));
}

TEST(ModelConfigTextTest, ValueErrorsNameFileLineAndField) {
  // A field left out is placed at its parent (the parser places the elements of `input [ ... ]`
  // at the line of `input`).
  const std::string dims =
      TextError("max_batch_size: 2\n\ninput {\n  name: \"x\" data_type: TYPE_FP32\n}\n");
  EXPECT_THAT(dims, HasSubstr("m/config.pbtxt line 3: field \"input[0].dims\""));
  EXPECT_THAT(dims, HasSubstr("needs \"dims\""));
  EXPECT_THAT(
      TextError("max_batch_size: 2\ndynamic_batching {\n  preferred_batch_size: [ 4 ]\n}\n"),
      HasSubstr("line 3: field \"dynamic_batching.preferred_batch_size\": 4 exceeds "
                "max_batch_size 2"));
  EXPECT_THAT(TextError("name: \"other\""), HasSubstr("line 1: field \"name\""));
  EXPECT_THAT(TextError("\n\ninstance_group [ { count: 0 } ]"),
              HasSubstr("line 3: field \"instance_group[0].count\""));
  EXPECT_THAT(TextError("platform: \"tensorrt_plan\""), HasSubstr("field \"platform\""));
  EXPECT_THAT(TextError("backend: \"python\""), HasSubstr("field \"backend\""));
  EXPECT_THAT(TextError("max_batch_size: -1"), HasSubstr("field \"max_batch_size\""));
}

TEST(ModelConfigTextTest, InstanceGroupsNameTheirGpus) {
  absl::StatusOr<ModelSettings> s =
      FromText("instance_group [ { count: 2 kind: KIND_GPU gpus: [ 1 ] } ]");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->instance_groups.size(), 1u);
  EXPECT_EQ(s->instance_groups[0].kind, "KIND_GPU");
  EXPECT_EQ(s->instance_groups[0].count, 2);
  EXPECT_THAT(s->instance_groups[0].gpus, ElementsAre(1));
  // Triton's rule: KIND_AUTO with GPUs is KIND_GPU; KIND_GPU without them means GPU 0.
  s = FromText("instance_group [ { gpus: [ 0 ] } ]");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->instance_groups[0].kind, "KIND_GPU");
  s = FromText("instance_group [ { kind: KIND_GPU } ]");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->instance_groups[0].gpus.empty());

  EXPECT_THAT(TextError("instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]"),
              HasSubstr("field \"instance_group[0].gpus\": names GPUs for a KIND_CPU group"));
  EXPECT_THAT(TextError("instance_group [ { kind: KIND_GPU gpus: [ -1 ] } ]"),
              HasSubstr("field \"instance_group[0].gpus\": must be GPU indices >= 0, got -1"));
  EXPECT_THAT(YamlError("instance_group: [{kind: KIND_GPU, gpus: [0, -2]}]\n"),
              HasSubstr("got -2"));
}

TEST(ModelConfigTextTest, SameMessagesForYaml) {
  // The same mistake in either format: the same field and message, the file's own line.
  const std::string text =
      TextError("max_batch_size: 2\ndynamic_batching { preferred_batch_size: [ 4 ] }\n");
  const std::string yaml =
      YamlError("max_batch_size: 2\ndynamic_batching:\n  preferred_batch_size: [4]\n");
  EXPECT_THAT(text, HasSubstr("m/config.pbtxt line 2: field "
                              "\"dynamic_batching.preferred_batch_size\": 4 exceeds"));
  EXPECT_THAT(yaml, HasSubstr("m/config.yaml line 3: field "
                              "\"dynamic_batching.preferred_batch_size\": 4 exceeds"));
  EXPECT_THAT(YamlError("sequence_batching: {max_sequence_idle_microseconds: 5}\n"),
              HasSubstr("m/config.yaml line 1: field \"sequence_batching\": is a Triton feature"));
}

TEST(ModelConfigTextTest, UnimplementedFeaturesAreRefusedByName) {
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"sequence_batching { max_sequence_idle_microseconds: 5000 control_input [ { name: "
            "\"START\" } ] }",
            "sequence_batching"},
           {"ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ] }",
            "ensemble_scheduling"},
           {"optimization { graph { level: 1 } }", "optimization"},
           {"model_warmup [ { name: \"w\" batch_size: 1 } ]", "model_warmup"},
           {"parameters { key: \"intra_op_thread_count\" value { string_value: \"1\" } }",
            "parameters"},
           {"input [ { name: \"x\" data_type: TYPE_FP32 dims: [1] reshape { shape: [] } } ]",
            "input[0].reshape"},
           {"max_batch_size: 4\ndynamic_batching { preserve_ordering: true }",
            "dynamic_batching.preserve_ordering"},
           {"dynamic_batching { default_queue_policy { timeout_action: DELAY } }",
            "dynamic_batching.default_queue_policy.timeout_action"},
           {"model_transaction_policy { decoupled: true }", "model_transaction_policy"},
           {"response_cache { enable: true }", "response_cache"},
           {"batch_input [ { } ]", "batch_input"},
           {"sequence_batching { }", "sequence_batching"},
           {"input [ { name: \"x\" data_type: TYPE_FP32 dims: [1] reshape { } } ]",
            "input[0].reshape"},
       }) {
    const std::string e = TextError(text);
    EXPECT_THAT(e, HasSubstr("field \"" + field + "\": is a Triton feature")) << text;
    EXPECT_THAT(e, HasSubstr("refused rather than ignored")) << text;
  }
  // An empty block of a feature with fields asks for nothing.
  EXPECT_TRUE(FromText("optimization { }\nmodel_transaction_policy { decoupled: false }").ok());
}

TEST(ModelConfigTextTest, PlatformAndBackendSynonyms) {
  for (const char* text :
       {"platform: \"onnxruntime_onnx\"", "backend: \"onnxruntime\"", "platform: \"onnx\"",
        "platform: \"onnxruntime_onnx\" backend: "
        "\"onnxruntime\"",
        "default_model_filename: \"model.onnx\""}) {
    absl::StatusOr<ModelSettings> s = FromText(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_EQ(s->platform, "onnxruntime_onnx");
    EXPECT_EQ(s->backend, "onnxruntime");
  }
  EXPECT_THAT(TextError("default_model_filename: \"model.plan\""),
              HasSubstr("field \"default_model_filename\""));
}

TEST(ModelConfigTextTest, AConfigBuiltInMemoryGoesThroughTheSamePath) {
  // E.g. a JSON override of a load: no lines, the same checks and messages.
  ParsedModelConfig parsed;
  parsed.locations = ConfigLocations("config override");
  parsed.config.set_max_batch_size(2);
  parsed.config.mutable_dynamic_batching()->add_preferred_batch_size(4);
  absl::StatusOr<ModelSettings> s = ModelSettingsFromConfig(parsed, "m");
  EXPECT_THAT(s.status().message(),
              HasSubstr("config override: field \"dynamic_batching.preferred_batch_size\": 4 "
                        "exceeds max_batch_size 2"));
  parsed.config.clear_dynamic_batching();
  parsed.config.add_input()->set_name("x");
  parsed.config.mutable_input(0)->set_data_type(static_cast<inference::DataType>(99));
  parsed.config.mutable_input(0)->add_dims(4);
  EXPECT_THAT(ModelSettingsFromConfig(parsed, "m").status().message(),
              HasSubstr("field \"input[0].data_type\""));
  parsed.config.mutable_input(0)->set_data_type(inference::TYPE_FP32);
  parsed.config.mutable_model_transaction_policy()->set_decoupled(true);
  EXPECT_THAT(ModelSettingsFromConfig(parsed, "m").status().message(),
              HasSubstr("field \"model_transaction_policy\": is a Triton feature"));
}

TEST(ModelConfigDirTest, BothFilesAreAnError) {
  const std::string dir = ::testing::TempDir() + "/model_config_both";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.pbtxt") << "max_batch_size: 4\n";
  std::ofstream(dir + "/config.yaml") << "max_batch_size: 4\n";
  absl::StatusOr<ParsedModelConfig> parsed = ReadModelConfigDir(dir);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("both config.pbtxt and config.yaml"));
  std::filesystem::remove(dir + "/config.yaml");
  parsed = ReadModelConfigDir(dir);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.max_batch_size(), 4);
  EXPECT_EQ(parsed->locations.source(), dir + "/config.pbtxt");
  std::filesystem::remove(dir + "/config.pbtxt");
  parsed = ReadModelConfigDir(dir);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.ByteSizeLong(), 0u);
  std::filesystem::remove_all(dir);
}

GraphTensors BatchableGraph() {
  GraphTensors g;
  g.inputs.push_back({"x", TensorType::kFp32, true, {-1, 4}});
  g.outputs.push_back({"y", TensorType::kFp32, true, {-1, 2}});
  return g;
}

TEST(AutoCompleteTest, BatchableGraphGetsTheDefaultMaxBatchSizeAndDynamicBatching) {
  const GraphTensors graph = BatchableGraph();
  absl::StatusOr<ModelSettings> s = FromText("", &graph);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_batch_size, 4);
  EXPECT_TRUE(s->dynamic_batching.has_value());
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_THAT(s->inputs[0].dims, ElementsAre(4));  // without the batch dimension
  EXPECT_THAT(s->outputs[0].dims, ElementsAre(2));

  s = FromText("", &graph, AutoComplete{true, 16});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 16);
  s = FromText("", &graph, AutoComplete{true, 0});  // default-max-batch-size=0: no batching
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_FALSE(s->dynamic_batching.has_value());
  EXPECT_THAT(s->inputs[0].dims, ElementsAre(-1, 4));
  s = FromText("", &graph, AutoComplete{false, 4});  // --disable-auto-complete-config
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_TRUE(s->inputs.empty());
}

TEST(AutoCompleteTest, WrittenValuesWin) {
  const GraphTensors graph = BatchableGraph();
  absl::StatusOr<ModelSettings> s = FromText("max_batch_size: 0", &graph);  // explicit 0
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  s = FromText("max_batch_size: 32\ndynamic_batching { preferred_batch_size: [ 8 ] }", &graph);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 32);
  EXPECT_THAT(s->dynamic_batching->preferred_batch_size, ElementsAre(8));
  // Inputs written with the batch dimension: the model is not batched.
  s = FromText("input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]", &graph);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->outputs.size(), 1u);  // still completed from the graph
  // Buckets are checked against the completed max_batch_size.
  EXPECT_THAT(FromText("capture { buckets: [ 8 ] }", &graph).status().message(),
              HasSubstr("8 exceeds max_batch_size 4"));
}

TEST(AutoCompleteTest, AFixedFirstDimensionIsNotBatched) {
  GraphTensors graph = BatchableGraph();
  graph.outputs[0].dims = {1, 2};
  absl::StatusOr<ModelSettings> s = FromText("", &graph);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_THAT(s->outputs[0].dims, ElementsAre(1, 2));
  graph = BatchableGraph();
  graph.inputs[0].has_shape = false;  // unknown rank: not batched, and inputs left to the backend
  s = FromText("", &graph);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 0);
  EXPECT_TRUE(s->inputs.empty());
}

}  // namespace
}  // namespace reprise::config
