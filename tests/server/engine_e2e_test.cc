// The daemon with the real engine backend, in process on 127.0.0.1 (ephemeral port), over a
// copy of the shipped example repository, driven by gRPC clients: results equal to the engine
// run directly, every bad-input case, a broken reload that keeps the old version serving,
// runtime instances through the admin service, real statistics, and infers to one model while
// another is loaded, unloaded and reloaded.
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "reprise_admin.grpc.pb.h"
#include "runtime/engine/npy.h"
#include "runtime/engine/stream_session.h"
#include "server/engine_backend.h"
#include "server/server.h"
#include "tests/runtime/engine/test_models.h"
#include "tests/server/temp_repo.h"
#include "tests/server/tsan_skip.h"

namespace reprise::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kRepo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/repository";
const std::string kZoo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/zoo/mlp";

std::string Bytes(const runtime::TensorValue& t) {
  return std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

runtime::TensorValue Npy(const std::string& path) {
  absl::StatusOr<runtime::TensorValue> t = runtime::engine::ReadNpyFile(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : runtime::TensorValue{};
}

inference::ModelInferRequest MlpRequest(const runtime::TensorValue& input) {
  inference::ModelInferRequest r;
  r.set_model_name("mlp");
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : input.shape) in->add_shape(d);
  r.add_raw_input_contents(Bytes(input));
  return r;
}

inference::ModelInferRequest AddSubRequest(std::vector<float> a, std::vector<float> b) {
  inference::ModelInferRequest r;
  r.set_model_name("add_sub");
  for (const auto& [name, values] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(static_cast<int64_t>(values->size() / 4));
    in->add_shape(4);
    r.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(values->data()), values->size() * 4));
  }
  return r;
}

// The engine run directly (eager, its own device) on `input`: the reference for the daemon.
std::string EngineOutput(const runtime::TensorValue& input) {
  absl::StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::CreateBackend("cpu");
  EXPECT_TRUE(backend.ok());
  absl::StatusOr<runtime::Device*> device = (*backend)->device(0);
  EXPECT_TRUE(kernels::cpu::RegisterCpuKernels((*device)->kernels()).ok());
  auto model = runtime::engine::Model::LoadFile(kRepo + "/mlp/1/model.onnx", *(*device)->kernels());
  EXPECT_TRUE(model.ok()) << model.status();
  auto session =
      runtime::engine::StreamSession::Create(*model, *device, runtime::engine::ExecMode::kEager);
  EXPECT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"input", input}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? Bytes((*out)[0].value) : "";
}

class EngineE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_SKIP_UNDER_TSAN();
    fs::copy(kRepo, repo_.path(), fs::copy_options::recursive);
    repo_.AddVersion("broken", 1);  // not an ONNX file: fails to load
    absl::StatusOr<std::unique_ptr<EngineBackend>> backend = EngineBackend::Create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    config::ServerConfig config;
    config.listen_address = "127.0.0.1";
    config.grpc_port = 0;
    config.http_port = 0;
    config.metrics_port = 0;  // a free port: parallel tests do not collide
    config.model_repositories = {repo_.path()};
    config.control_mode = config::ControlMode::kExplicit;
    config.load_models = {"*"};
    config.cpu_threads = 4;
    config.max_message_bytes = 1 << 20;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, backend_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    EXPECT_FALSE(server_->WaitForStartupLoads().ok());  // "broken" fails
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
    admin_ = reprise::v1::RuntimeInstances::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) {
      EXPECT_TRUE(server_->Shutdown());
    }
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    return stub_->ModelInfer(&ctx, request, response);
  }
  grpc::Status Load(const std::string& model, bool load = true) {
    grpc::ClientContext ctx;
    if (load) {
      inference::RepositoryModelLoadRequest r;
      r.set_model_name(model);
      inference::RepositoryModelLoadResponse out;
      return stub_->RepositoryModelLoad(&ctx, r, &out);
    }
    inference::RepositoryModelUnloadRequest r;
    r.set_model_name(model);
    inference::RepositoryModelUnloadResponse out;
    return stub_->RepositoryModelUnload(&ctx, r, &out);
  }

  testing::TempRepo repo_;
  std::unique_ptr<EngineBackend> backend_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<reprise::v1::RuntimeInstances::Stub> admin_;
};

TEST_F(EngineE2eTest, InferEqualsTheEngineRunDirectly) {
  for (const char* batch : {"b1", "b4"}) {
    const runtime::TensorValue input = Npy(kZoo + "/input_" + batch + ".npy");
    const std::string want = EngineOutput(input);
    for (int run = 0; run < 3; ++run) {  // capture, then replays
      inference::ModelInferResponse resp;
      grpc::Status s = Infer(MlpRequest(input), &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_EQ(resp.outputs_size(), 1);
      EXPECT_EQ(resp.outputs(0).name(), "output");
      EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
      EXPECT_THAT(resp.outputs(0).shape(), ::testing::ElementsAre(input.shape[0], 10));
      EXPECT_EQ(resp.model_version(), "1");
      EXPECT_EQ(resp.raw_output_contents(0), want) << batch << " run " << run;
    }
  }
  // add_sub with typed contents and one requested output.
  inference::ModelInferRequest r;
  r.set_model_name("add_sub");
  for (const char* name : {"a", "b"}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    for (float v : {1.f, 2.f, 3.f, 4.f}) {
      in->mutable_contents()->add_fp32_contents(name[0] == 'a' ? v : 10 * v);
    }
  }
  r.add_outputs()->set_name("sum");
  inference::ModelInferResponse resp;
  ASSERT_TRUE(Infer(r, &resp).ok());
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "sum");
  std::vector<float> sum(4);
  ASSERT_EQ(resp.raw_output_contents(0).size(), 16u);
  std::memcpy(sum.data(), resp.raw_output_contents(0).data(), 16);
  EXPECT_THAT(sum, ::testing::ElementsAre(11, 22, 33, 44));
}

TEST_F(EngineE2eTest, BadRequestsGetTheirStatusCodes) {
  inference::ModelInferResponse resp;
  auto code = [&](const inference::ModelInferRequest& r) { return Infer(r, &resp).error_code(); };
  const std::vector<float> four = {1, 2, 3, 4};

  inference::ModelInferRequest r = AddSubRequest(four, four);
  r.set_model_name("nope");
  EXPECT_EQ(code(r), grpc::StatusCode::NOT_FOUND);
  r = AddSubRequest(four, four);
  r.set_model_version("7");
  EXPECT_EQ(code(r), grpc::StatusCode::NOT_FOUND);
  r.set_model_name("broken");  // found in the repository, failed to load: not ready
  r.set_model_version("");
  grpc::Status s = Infer(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("\"broken\""));

  r = AddSubRequest(four, four);  // missing input
  r.mutable_inputs()->RemoveLast();
  r.mutable_raw_input_contents()->RemoveLast();
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = AddSubRequest(four, four);  // extra input
  *r.add_inputs() = r.inputs(0);
  r.mutable_inputs(2)->set_name("c");
  r.add_raw_input_contents(r.raw_input_contents(0));
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = AddSubRequest(four, four);  // wrong datatype
  r.mutable_inputs(0)->set_datatype("INT32");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = AddSubRequest(four, four);  // wrong shape
  r.mutable_inputs(1)->set_shape(1, 5);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = AddSubRequest(four, four);  // byte count does not match the shape
  r.mutable_raw_input_contents(1)->append("xxxx");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = AddSubRequest(four, four);  // raw and typed contents mixed
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  // Above max_message_bytes (1 MiB here): refused by gRPC before it reaches the model.
  const std::vector<float> big(300000, 1.0f);
  r = AddSubRequest(big, big);
  EXPECT_EQ(code(r), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The server still serves.
  ASSERT_TRUE(Infer(AddSubRequest(four, four), &resp).ok());
}

TEST_F(EngineE2eTest, BrokenReloadKeepsTheOldVersionServing) {
  const runtime::TensorValue input = Npy(kZoo + "/input_b1.npy");
  inference::ModelInferResponse before;
  ASSERT_TRUE(Infer(MlpRequest(input), &before).ok());
  std::ofstream(repo_.path() + "/mlp/1/model.onnx", std::ios::trunc) << "not a model";
  grpc::Status s = Load("mlp");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.error_message(), HasSubstr("mlp/1/model.onnx"));  // the engine's message
  inference::ModelInferResponse after;
  ASSERT_TRUE(Infer(MlpRequest(input), &after).ok());
  EXPECT_EQ(after.raw_output_contents(0), before.raw_output_contents(0));
  grpc::ClientContext ctx;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx, {}, &index).ok());
  bool ready = false;
  for (const auto& m : index.models()) {
    if (m.name() == "mlp" && m.version() == "1") ready = m.state() == "READY";
  }
  EXPECT_TRUE(ready);
}

// A model whose config asks for a GPU, where there is none: the load fails with a message that
// names the model and the device, the index says why, and the other models keep serving.
// (With a GPU, cuda_serving_test serves such a model.)
TEST_F(EngineE2eTest, GpuModelWithoutAGpuFailsToLoadNamingTheDevice) {
#if REPRISE_SERVE_CUDA
  if (runtime::CreateBackend("cuda").ok()) GTEST_SKIP() << "a GPU is present";
#endif
  fs::copy(kRepo + "/mlp", repo_.path() + "/mlp_gpu", fs::copy_options::recursive);
  repo_.WriteConfig("mlp_gpu",
                    "name: mlp_gpu\nmax_batch_size: 8\n"
                    "instance_group: [{count: 1, kind: KIND_GPU, gpus: [0]}]\n");
  grpc::Status s = Load("mlp_gpu");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.error_message(), HasSubstr("model \"mlp_gpu\" version 1: instance_group asks "
                                           "for KIND_GPU on cuda:0, but "));
  inference::ModelInferRequest request = MlpRequest(Npy(kZoo + "/input_b1.npy"));
  request.set_model_name("mlp_gpu");
  inference::ModelInferResponse resp;
  s = Infer(request, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("cuda:0"));
  grpc::ClientContext ctx;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx, {}, &index).ok());
  std::string reason;
  for (const auto& m : index.models()) {
    if (m.name() == "mlp_gpu") reason = m.reason();
  }
  EXPECT_THAT(reason, HasSubstr("KIND_GPU on cuda:0"));
  EXPECT_TRUE(Infer(MlpRequest(Npy(kZoo + "/input_b1.npy")), &resp).ok());
}

TEST_F(EngineE2eTest, AdminListsAndDumpsTheCapturedInstances) {
  const runtime::TensorValue input = Npy(kZoo + "/input_b4.npy");
  for (int i = 0; i < 3; ++i) {
    inference::ModelInferResponse resp;
    ASSERT_TRUE(Infer(MlpRequest(input), &resp).ok());
  }
  grpc::ClientContext ctx;
  reprise::v1::ListInstancesRequest list;
  list.set_model("mlp");
  reprise::v1::ListInstancesResponse instances;
  ASSERT_TRUE(admin_->ListInstances(&ctx, list, &instances).ok());
  ASSERT_EQ(instances.instances_size(), 1);  // one client: stream 0 only
  const auto& ri = instances.instances(0);
  EXPECT_EQ(ri.model(), "mlp");
  EXPECT_EQ(ri.version(), "1");
  EXPECT_EQ(ri.stream(), 0);
  EXPECT_EQ(ri.shape_signature(), "input:[4,64]");
  EXPECT_EQ(ri.state(), "CAPTURED");
  EXPECT_EQ(ri.captures(), 1u);
  EXPECT_EQ(ri.replays(), 3u);  // the capturing run replays the new instance too
  EXPECT_GT(ri.capture_time_ns(), 0u);
  EXPECT_EQ(ri.part(), "");  // a model run whole

  grpc::ClientContext dctx;
  reprise::v1::DumpInstanceRequest dump;
  dump.set_model("mlp");
  dump.set_stream(0);
  dump.set_shape_signature("input:[4,64]");
  reprise::v1::DumpInstanceResponse json;
  ASSERT_TRUE(admin_->DumpInstance(&dctx, dump, &json).ok());
  EXPECT_THAT(json.json(), HasSubstr("{"));
  grpc::ClientContext ectx;
  dump.set_stream(1);  // stream 1 captured nothing
  EXPECT_EQ(admin_->DumpInstance(&ectx, dump, &json).error_code(), grpc::StatusCode::NOT_FOUND);
}

// A model with NonZero is cut there: the admin lists the replayed prefix and the tail planned per
// input as the parts of the model's instances, and every request gets its own indices.
TEST_F(EngineE2eTest, AdminNamesThePartsOfACutModel) {
  runtime::engine::testing::ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {6}).Output("z", {1, -1}, onnx::TensorProto::INT64);
  b.Node("Relu", {"x"}, {"r"});
  b.Node("NonZero", {"r"}, {"z"});
  fs::create_directories(fs::path(repo_.path()) / "nonzero" / "1");
  {
    std::ofstream file(fs::path(repo_.path()) / "nonzero" / "1" / "model.onnx", std::ios::binary);
    file << b.Bytes();
  }
  ASSERT_TRUE(Load("nonzero").ok());
  for (const std::vector<float>& x :
       {std::vector<float>{1, -1, 2, 0, -3, 4}, std::vector<float>{-1, -1, 5, -1, -1, -1}}) {
    inference::ModelInferRequest r;
    r.set_model_name("nonzero");
    auto* in = r.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(6);
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), 24));
    inference::ModelInferResponse resp;
    ASSERT_TRUE(Infer(r, &resp).ok());
    std::vector<int64_t> want;
    for (int64_t i = 0; i < 6; ++i) {
      if (x[i] > 0) want.push_back(i);
    }
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    std::vector<int64_t> got(resp.raw_output_contents(0).size() / sizeof(int64_t));
    std::memcpy(got.data(), resp.raw_output_contents(0).data(), got.size() * sizeof(int64_t));
    EXPECT_EQ(got, want);
  }
  grpc::ClientContext ctx;
  reprise::v1::ListInstancesRequest list;
  list.set_model("nonzero");
  reprise::v1::ListInstancesResponse instances;
  ASSERT_TRUE(admin_->ListInstances(&ctx, list, &instances).ok());
  int prefix = 0, tail = 0;
  for (const auto& ri : instances.instances()) {
    if (ri.part() == "PREFIX") {
      ++prefix;
      EXPECT_EQ(ri.shape_signature(), "x:[6]");
      EXPECT_EQ(ri.replays(), 2u);
    } else {
      EXPECT_EQ(ri.part(), "TAIL");
      ++tail;
    }
  }
  EXPECT_EQ(prefix, 1);
  EXPECT_EQ(tail, 1);  // the latest input's plan alone
}

TEST_F(EngineE2eTest, StatisticsCountWhatHappened) {
  const runtime::TensorValue b1 = Npy(kZoo + "/input_b1.npy");
  const runtime::TensorValue b4 = Npy(kZoo + "/input_b4.npy");
  inference::ModelInferResponse resp;
  ASSERT_TRUE(Infer(MlpRequest(b1), &resp).ok());
  ASSERT_TRUE(Infer(MlpRequest(b4), &resp).ok());
  ASSERT_TRUE(Infer(MlpRequest(b4), &resp).ok());
  inference::ModelInferRequest bad = MlpRequest(b1);
  bad.mutable_inputs(0)->set_datatype("FP64");
  ASSERT_FALSE(Infer(bad, &resp).ok());

  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest req;
  req.set_name("mlp");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub_->ModelStatistics(&ctx, req, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  const auto& m = stats.model_stats(0);
  EXPECT_EQ(m.inference_count(), 9u);  // 1 + 4 + 4
  EXPECT_EQ(m.execution_count(), 3u);
  EXPECT_GT(m.last_inference(), 0u);
  const auto& s = m.inference_stats();
  EXPECT_EQ(s.success().count(), 3u);
  EXPECT_EQ(s.fail().count(), 1u);
  EXPECT_EQ(s.queue().count(), 3u);
  EXPECT_EQ(s.compute_infer().count(), 3u);
  EXPECT_GT(s.compute_infer().ns(), 0u);
  EXPECT_GE(s.success().ns(), s.compute_infer().ns());
  EXPECT_EQ(s.compute_input().count(), 3u);
  EXPECT_EQ(s.compute_output().count(), 3u);
  // One execution per request (no dynamic_batching): batch sizes 1 once and 4 twice.
  ASSERT_EQ(m.batch_stats_size(), 2);
  EXPECT_EQ(m.batch_stats(0).batch_size(), 1u);
  EXPECT_EQ(m.batch_stats(0).compute_infer().count(), 1u);
  EXPECT_EQ(m.batch_stats(1).batch_size(), 4u);
  EXPECT_EQ(m.batch_stats(1).compute_infer().count(), 2u);

  // The capture totals: b1 and b4 each captured once on stream 0, b4 replayed again.
  grpc::ClientContext actx;
  reprise::v1::ListInstancesRequest list;
  list.set_model("mlp");
  reprise::v1::ListInstancesResponse instances;
  ASSERT_TRUE(admin_->ListInstances(&actx, list, &instances).ok());
  ASSERT_EQ(instances.versions_size(), 1);
  EXPECT_EQ(instances.versions(0).captures(), 2u);
  EXPECT_EQ(instances.versions(0).replays(), 3u);
  EXPECT_EQ(instances.versions(0).evictions(), 0u);
  EXPECT_GT(instances.versions(0).load_ns(), 0u);
}

TEST_F(EngineE2eTest, PriorityAndTimeoutParametersAreChecked) {
  const runtime::TensorValue b1 = Npy(kZoo + "/input_b1.npy");
  inference::ModelInferResponse resp;
  inference::ModelInferRequest r = MlpRequest(b1);
  (*r.mutable_parameters())["priority"].set_int64_param(5);  // the model has one level
  grpc::Status st = Infer(r, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("priority 5"));
  r = MlpRequest(b1);
  (*r.mutable_parameters())["timeout"].set_int64_param(-1);
  st = Infer(r, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("\"timeout\""));
  r = MlpRequest(b1);
  (*r.mutable_parameters())["priority"].set_uint64_param(1);
  (*r.mutable_parameters())["timeout"].set_uint64_param(60'000'000);
  EXPECT_TRUE(Infer(r, &resp).ok());
}

TEST_F(EngineE2eTest, InfersKeepSucceedingWhileAnotherModelReloads) {
  const runtime::TensorValue input = Npy(kZoo + "/input_b4.npy");
  const std::string want = EngineOutput(input);
  std::atomic<bool> stop{false};
  std::atomic<int> served{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(channel_);
      const inference::ModelInferRequest request = MlpRequest(input);
      while (!stop.load()) {
        grpc::ClientContext ctx;
        inference::ModelInferResponse resp;
        grpc::Status s = stub->ModelInfer(&ctx, request, &resp);
        if (s.ok() && resp.raw_output_contents_size() == 1 && resp.raw_output_contents(0) == want) {
          served.fetch_add(1);
        } else {
          failed.fetch_add(1);
        }
      }
    });
  }
  // The bound is the number of cycles (each one a real unload and load), not a time.
  inference::ModelInferResponse resp;
  for (int cycle = 0; cycle < 20; ++cycle) {
    EXPECT_TRUE(Load("add_sub", false).ok());
    EXPECT_TRUE(Load("add_sub").ok());
    EXPECT_TRUE(Infer(AddSubRequest({1, 2, 3, 4}, {1, 1, 1, 1}), &resp).ok());
    EXPECT_TRUE(Load("add_sub").ok());  // a reload of a loaded model
  }
  stop.store(true);
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(served.load(), 0);
}

}  // namespace
}  // namespace reprise::server
