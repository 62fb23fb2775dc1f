// EngineBackend on the shipped example repository (tools/models/repository): the signature
// from the graph and config.yaml, their mismatches, a broken file, inference equal to the
// zoo's reference outputs, and the runtime instances the streams capture.
#include "server/engine_backend.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "config/server_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/npy.h"
#include "tests/server/temp_repo.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kRepo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/repository";
const std::string kZoo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/zoo/mlp";

config::ModelSettings Settings(const std::string& yaml, const std::string& name) {
  absl::StatusOr<config::ModelSettings> s = config::ParseModelSettings(yaml, "test", name);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : config::ModelSettings{};
}

config::ModelSettings RepoSettings(const std::string& model) {
  absl::StatusOr<std::string> text = config::ReadTextFile(kRepo + "/" + model + "/config.yaml");
  EXPECT_TRUE(text.ok()) << text.status();
  return Settings(text.ok() ? *text : "", model);
}

LoadSpec Spec(const std::string& model, const std::string& path,
              const config::ModelSettings* settings, int streams) {
  LoadSpec spec;
  spec.model_name = model;
  spec.version = 1;
  spec.model_path = path;
  spec.settings = settings;
  spec.streams = streams;
  return spec;
}

InputTensor Input(const std::string& name, const runtime::TensorValue& t) {
  InputTensor in;
  in.name = name;
  in.dtype = t.dtype;
  in.shape = t.shape;
  in.data = absl::string_view(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return in;
}

void ExpectNear(const std::string& got, const runtime::TensorValue& want, float tolerance) {
  ASSERT_EQ(got.size(), want.bytes.size());
  for (size_t i = 0; i < got.size() / 4; ++i) {
    float a = 0, b = 0;
    std::memcpy(&a, got.data() + i * 4, 4);
    std::memcpy(&b, want.bytes.data() + i * 4, 4);
    ASSERT_NEAR(a, b, tolerance) << "element " << i;
  }
}

class EngineBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EngineBackend>> backend = EngineBackend::Create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }
  absl::Status LoadError(const std::string& yaml) {
    config::ModelSettings settings = Settings(yaml, "mlp");
    return backend_->Load(Spec("mlp", kRepo + "/mlp/1/model.onnx", &settings, 1)).status();
  }
  std::unique_ptr<EngineBackend> backend_;
};

TEST_F(EngineBackendTest, ServesTheExampleMlpLikeTheReference) {
  const config::ModelSettings settings = RepoSettings("mlp");
  absl::StatusOr<std::unique_ptr<LoadedModel>> model =
      backend_->Load(Spec("mlp", kRepo + "/mlp/1/model.onnx", &settings, 2));
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelSignature& sig = (*model)->signature();
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].name, "input");
  EXPECT_EQ(sig.inputs[0].dtype, runtime::DataType::kFloat32);
  EXPECT_THAT(sig.inputs[0].shape, ElementsAre(-1, 64));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_THAT(sig.outputs[0].shape, ElementsAre(-1, 10));

  for (const char* batch : {"b1", "b4", "b4"}) {
    absl::StatusOr<runtime::TensorValue> in =
        runtime::engine::ReadNpyFile(kZoo + "/input_" + batch + ".npy");
    absl::StatusOr<runtime::TensorValue> want =
        runtime::engine::ReadNpyFile(kZoo + "/output_" + batch + ".npy");
    ASSERT_TRUE(in.ok() && want.ok());
    std::vector<InputTensor> inputs = {Input("input", *in)};
    std::vector<std::string> outputs = {"output"};
    InferTimings timings;
    absl::StatusOr<std::vector<OutputTensor>> out = (*model)->Infer(inputs, outputs, &timings);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].name, "output");
    EXPECT_EQ((*out)[0].shape, want->shape);
    ExpectNear((*out)[0].data, *want, 1e-4f);  // PyTorch computed the reference
    EXPECT_GT(timings.compute_ns, 0);
  }
  // One client: every run went to stream 0; b1 captured once, b4 captured once and replayed.
  std::vector<RuntimeInstanceInfo> instances = (*model)->ListRuntimeInstances();
  ASSERT_EQ(instances.size(), 2u);
  for (const RuntimeInstanceInfo& ri : instances) {
    EXPECT_EQ(ri.stream, 0);
    EXPECT_EQ(ri.state, "CAPTURED");
    EXPECT_EQ(ri.captures, 1u);
  }
  const RuntimeInstanceInfo& b4 =
      instances[0].shape_signature == "input:[4,64]" ? instances[0] : instances[1];
  EXPECT_EQ(b4.shape_signature, "input:[4,64]");
  EXPECT_GE(b4.replays, 2u);  // the capturing run replays too
  absl::StatusOr<std::string> dump = (*model)->DumpRuntimeInstance(0, "input:[4,64]", false);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("{"));
  EXPECT_EQ((*model)->DumpRuntimeInstance(0, "input:[3,64]", false).status().code(),
            absl::StatusCode::kNotFound);
  absl::Status bad_stream = (*model)->DumpRuntimeInstance(2, "input:[4,64]", false).status();
  EXPECT_EQ(bad_stream.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(bad_stream.message(), HasSubstr("stream 2"));
}

TEST_F(EngineBackendTest, TwoInputModelComputesSumAndDifference) {
  const config::ModelSettings settings = RepoSettings("add_sub");
  absl::StatusOr<std::unique_ptr<LoadedModel>> model =
      backend_->Load(Spec("add_sub", kRepo + "/add_sub/1/model.onnx", &settings, 1));
  ASSERT_TRUE(model.ok()) << model.status();
  runtime::TensorValue a{runtime::DataType::kFloat32, {1, 4}, {}};
  runtime::TensorValue b = a;
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  a.bytes.assign(reinterpret_cast<const uint8_t*>(av), reinterpret_cast<const uint8_t*>(av) + 16);
  b.bytes.assign(reinterpret_cast<const uint8_t*>(bv), reinterpret_cast<const uint8_t*>(bv) + 16);
  std::vector<InputTensor> inputs = {Input("a", a), Input("b", b)};
  std::vector<std::string> outputs = {"diff"};  // a subset, by name
  absl::StatusOr<std::vector<OutputTensor>> out = (*model)->Infer(inputs, outputs, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "diff");
  float diff[4];
  ASSERT_EQ((*out)[0].data.size(), sizeof(diff));
  std::memcpy(diff, (*out)[0].data.data(), sizeof(diff));
  EXPECT_THAT(diff, ElementsAre(-9, -18, -27, -36));
}

TEST_F(EngineBackendTest, ConfigMismatchNamesTheTensor) {
  absl::Status s =
      LoadError("max_batch_size: 8\ninput: [{name: x, data_type: TYPE_FP32, dims: [64]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("input \"input\" of the graph is missing in the model config"));

  s = LoadError("max_batch_size: 8\ninput: [{name: input, data_type: TYPE_INT64, dims: [64]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input \"input\" is TYPE_INT64 in the model config"));

  s = LoadError("max_batch_size: 8\ninput: [{name: input, data_type: TYPE_FP32, dims: [32]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input \"input\" has shape [-1,32] in the model config"));

  // Without max_batch_size the dims are the full shape: [64] has the wrong rank.
  s = LoadError("input: [{name: input, data_type: TYPE_FP32, dims: [64]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has shape [64] in the model config"));

  s = LoadError("max_batch_size: 8\noutput: [{name: logits, data_type: TYPE_FP32, dims: [10]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output \"logits\" of the model config is not in the graph"));
  EXPECT_THAT(s.message(), HasSubstr("model \"mlp\" version 1"));

  // No config.yaml entries: the graph alone decides (dims without max_batch_size stay symbolic).
  EXPECT_TRUE(LoadError("").ok());
}

TEST_F(EngineBackendTest, BrokenFileFailsWithTheEnginesMessage) {
  testing::TempRepo repo;
  repo.AddVersion("bad", 1);  // "fake": not an ONNX model
  const std::string path = repo.path() + "/bad/1/model.onnx";
  absl::StatusOr<std::unique_ptr<LoadedModel>> model =
      backend_->Load(Spec("bad", path, nullptr, 1));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr(path));
  EXPECT_EQ(backend_->Load(Spec("bad", repo.path() + "/missing.onnx", nullptr, 1)).status().ok(),
            false);
}

TEST_F(EngineBackendTest, GpuModelWithoutAGpuRefusesToLoadNamingTheModelAndDevice) {
#if REPRISE_SERVE_CUDA
  if (runtime::CreateBackend("cuda").ok()) GTEST_SKIP() << "a GPU is present";
#endif
  absl::Status s = LoadError("max_batch_size: 8\ninstance_group: [{kind: KIND_GPU, gpus: [0]}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("model \"mlp\" version 1: instance_group asks for "
                                     "KIND_GPU on cuda:0, but "));
  // The reason: no usable device (the driver's words), or a build without GPU serving.
  EXPECT_THAT(s.message(), ::testing::AnyOf(HasSubstr("no CUDA device can be used: "),
                                            HasSubstr("was built without")));
  // The CPU device still serves.
  EXPECT_TRUE(LoadError("instance_group: [{kind: KIND_CPU}]\n").ok());
  std::vector<DeviceMemoryInfo> memory = backend_->MemoryUsage();
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].device, "cpu:0");
}

TEST(PlacementForTest, KindGpuGroupsPlaceTheModelOnOneCudaDevice) {
  auto placement = [](const std::string& yaml) {
    return PlacementFor(Settings(yaml, "m"), "model \"m\" version 1");
  };
  absl::StatusOr<DevicePlacement> p = placement("");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->backend, "cpu");
  p = placement("instance_group: [{count: 2, kind: KIND_CPU}, {kind: KIND_AUTO}]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->backend, "cpu");
  p = placement("instance_group: [{count: 2, kind: KIND_GPU}]");  // no gpus: GPU 0
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->backend, "cuda");
  EXPECT_EQ(p->index, 0);
  p = placement("instance_group: [{kind: KIND_GPU, gpus: [1]}, {kind: KIND_GPU, gpus: [1]}]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->index, 1);

  p = placement("instance_group: [{kind: KIND_GPU, gpus: [0, 1]}]");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(p.status().message(), HasSubstr("model \"m\" version 1: instance_group names "
                                              "GPUs [0,1]; a model runs on one GPU"));
  p = placement("instance_group: [{kind: KIND_GPU}, {kind: KIND_CPU}]");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("mixes KIND_GPU with other kinds"));
}

// Streams x intra-op threads stays within the cores: 0 shares the cores out, a configured value
// is kept when it fits and cut (and reported) when it does not; never below one thread.
TEST(IntraOpThreadsTest, SharesTheCoresAmongTheStreams) {
  bool clamped = true;
  EXPECT_EQ(IntraOpThreadsFor(0, 2, 16, &clamped), 8);
  EXPECT_FALSE(clamped);
  EXPECT_EQ(IntraOpThreadsFor(0, 3, 16, &clamped), 5);
  EXPECT_EQ(IntraOpThreadsFor(0, 4, 2, &clamped), 1);
  EXPECT_FALSE(clamped);
  EXPECT_EQ(IntraOpThreadsFor(2, 2, 16, &clamped), 2);
  EXPECT_FALSE(clamped);
  EXPECT_EQ(IntraOpThreadsFor(8, 4, 16, &clamped), 4);
  EXPECT_TRUE(clamped);
  EXPECT_EQ(IntraOpThreadsFor(3, 1, 0, &clamped), 1);
  EXPECT_TRUE(clamped);
}

}  // namespace
}  // namespace reprise::server
