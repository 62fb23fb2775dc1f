// The whole server in process on 127.0.0.1 with an ephemeral port and the fake backend, driven
// by real gRPC clients: every RPC of the protocol, health, admin, and graceful shutdown.
#include "server/server.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "health.grpc.pb.h"
#include "reprise_admin.grpc.pb.h"
#include "tests/server/fake_backend.h"
#include "tests/server/temp_repo.h"
#include "tests/server/tsan_skip.h"

namespace reprise::server {
namespace {

using inference::GRPCInferenceService;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> ToFloats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

inference::ModelInferRequest AddRequest(const std::string& model, std::vector<float> a,
                                        std::vector<float> b) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  const int64_t rows = static_cast<int64_t>(a.size() / 4);
  for (const char* name : {"a", "b"}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(rows);
    in->add_shape(4);
  }
  r.add_raw_input_contents(Floats(a));
  r.add_raw_input_contents(Floats(b));
  return r;
}

// A config for a server on 127.0.0.1 with an ephemeral port over `repo`.
config::ServerConfig LoopbackConfig(const std::string& repo) {
  config::ServerConfig config;
  config.listen_address = "127.0.0.1";
  config.grpc_port = 0;
  config.http_port = 0;
  config.metrics_port = 0;  // a free port: parallel tests do not collide
  config.model_repositories = {repo};
  return config;
}

std::shared_ptr<grpc::Channel> ChannelTo(const Server& server) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                             grpc::InsecureChannelCredentials());
}

class ServerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_SKIP_UNDER_TSAN();
    repo_.AddVersion("add", 1);
    repo_.AddVersion("add", 2);
    repo_.WriteConfig("add",
                      "max_batch_size: 8\n"
                      "version_policy: {all: {}}\n"
                      "instance_group: [{count: 2, kind: KIND_CPU}]\n"
                      "dynamic_batching: {preferred_batch_size: [4], "
                      "max_queue_delay_microseconds: 50}\n");
    repo_.AddVersion("echo", 1);
    repo_.AddVersion("blocking", 1);
    repo_.AddVersion("broken", 1);
    backend_.FailVersion("broken", 1);

    config::ServerConfig config = LoopbackConfig(repo_.path());
    config.control_mode = config::ControlMode::kExplicit;
    config.load_models = {"add", "echo", "blocking"};
    config.cpu_threads = 2;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, &backend_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(server_->WaitForStartupLoads().ok());
    channel_ = ChannelTo(*server_);
    stub_ = GRPCInferenceService::NewStub(channel_);
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

  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health->Check(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.status();
  }

  testing::TempRepo repo_;
  testing::FakeBackend backend_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(ServerE2eTest, HealthAndMetadata) {
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse r;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  {
    grpc::ClientContext ctx;
    inference::ServerMetadataResponse r;
    ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &r).ok());
    EXPECT_EQ(r.name(), "reprise");
    EXPECT_FALSE(r.version().empty());
    EXPECT_THAT(r.extensions(), ::testing::Contains("model_repository"));
  }
  for (const auto& [name, version, ready] :
       std::vector<std::tuple<std::string, std::string, bool>>{{"add", "", true},
                                                               {"add", "1", true},
                                                               {"add", "3", false},
                                                               {"broken", "", false},
                                                               {"nothing", "", false}}) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name(name);
    req.set_version(version);
    inference::ModelReadyResponse r;
    ASSERT_TRUE(stub_->ModelReady(&ctx, req, &r).ok());
    EXPECT_EQ(r.ready(), ready) << name << " " << version;
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("add");
    inference::ModelMetadataResponse r;
    ASSERT_TRUE(stub_->ModelMetadata(&ctx, req, &r).ok());
    EXPECT_EQ(r.name(), "add");
    EXPECT_THAT(r.versions(), ElementsAre("1", "2"));
    EXPECT_EQ(r.platform(), "onnxruntime_onnx");
    ASSERT_EQ(r.inputs_size(), 2);
    EXPECT_EQ(r.inputs(0).name(), "a");
    EXPECT_EQ(r.inputs(0).datatype(), "FP32");
    EXPECT_THAT(r.inputs(0).shape(), ElementsAre(-1, 4));
    EXPECT_EQ(r.outputs(1).name(), "diff");
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("missing");
    inference::ModelMetadataResponse r;
    grpc::Status s = stub_->ModelMetadata(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("\"missing\""));
  }
}

TEST_F(ServerE2eTest, InferRawTypedAndBytes) {
  inference::ModelInferRequest req = AddRequest("add", {1, 2, 3, 4}, {10, 20, 30, 40});
  req.set_id("abc");
  (*req.mutable_parameters())["note"].set_string_param("kept");
  inference::ModelInferResponse resp;
  grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_name(), "add");
  EXPECT_EQ(resp.model_version(), "2");
  EXPECT_EQ(resp.id(), "abc");
  EXPECT_EQ(resp.parameters().at("note").string_param(), "kept");
  ASSERT_EQ(resp.outputs_size(), 2);
  EXPECT_EQ(resp.outputs(0).name(), "sum");
  EXPECT_THAT(ToFloats(resp.raw_output_contents(0)), ElementsAre(11, 22, 33, 44));
  EXPECT_THAT(ToFloats(resp.raw_output_contents(1)), ElementsAre(-9, -18, -27, -36));

  // Typed contents, one requested output, an explicit version.
  inference::ModelInferRequest typed;
  typed.set_model_name("add");
  typed.set_model_version("1");
  for (const char* name : {"a", "b"}) {
    auto* in = typed.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    for (float v : {1.0f, 1.0f, 1.0f, 1.0f}) in->mutable_contents()->add_fp32_contents(v);
  }
  typed.add_outputs()->set_name("diff");
  inference::ModelInferResponse typed_resp;
  ASSERT_TRUE(Infer(typed, &typed_resp).ok());
  EXPECT_EQ(typed_resp.model_version(), "1");
  ASSERT_EQ(typed_resp.outputs_size(), 1);
  EXPECT_EQ(typed_resp.outputs(0).name(), "diff");
  EXPECT_THAT(ToFloats(typed_resp.raw_output_contents(0)), ElementsAre(0, 0, 0, 0));

  // BYTES and BOOL through the echo model.
  inference::ModelInferRequest echo;
  echo.set_model_name("echo");
  auto* text = echo.add_inputs();
  text->set_name("text");
  text->set_datatype("BYTES");
  text->add_shape(2);
  text->mutable_contents()->add_bytes_contents("hello");
  text->mutable_contents()->add_bytes_contents("");
  auto* flag = echo.add_inputs();
  flag->set_name("flag");
  flag->set_datatype("BOOL");
  flag->add_shape(2);
  flag->mutable_contents()->add_bool_contents(true);
  flag->mutable_contents()->add_bool_contents(false);
  inference::ModelInferResponse echo_resp;
  ASSERT_TRUE(Infer(echo, &echo_resp).ok());
  EXPECT_EQ(echo_resp.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(echo_resp.raw_output_contents(0), std::string("\x05\0\0\0hello\0\0\0\0", 13));
  EXPECT_EQ(echo_resp.raw_output_contents(1), std::string("\x01\x00", 2));
}

TEST_F(ServerE2eTest, InferErrorsMapToStatusCodes) {
  inference::ModelInferResponse resp;
  inference::ModelInferRequest unknown = AddRequest("nope", {1, 2, 3, 4}, {1, 2, 3, 4});
  grpc::Status s = Infer(unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("\"nope\""));

  inference::ModelInferRequest version = AddRequest("add", {1, 2, 3, 4}, {1, 2, 3, 4});
  version.set_model_version("9");
  s = Infer(version, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("version 9"));

  inference::ModelInferRequest shape = AddRequest("add", {1, 2, 3, 4}, {1, 2, 3, 4});
  shape.mutable_inputs(1)->set_shape(1, 2);
  s = Infer(shape, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("model \"add\" version 2: input \"b\" has shape [1,2]"));

  inference::ModelInferRequest batch =
      AddRequest("add", std::vector<float>(36, 1.0f), std::vector<float>(36, 1.0f));
  s = Infer(batch, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("batch size 9 exceeds max_batch_size 8"));
}

TEST_F(ServerE2eTest, StreamInfer) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(AddRequest("add", {1, 1, 1, 1}, {2, 2, 2, 2})));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(r.error_message().empty()) << r.error_message();
  EXPECT_THAT(ToFloats(r.infer_response().raw_output_contents(0)), ElementsAre(3, 3, 3, 3));
  // An error comes back in the message and the stream goes on.
  ASSERT_TRUE(stream->Write(AddRequest("nope", {1, 1, 1, 1}, {2, 2, 2, 2})));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_THAT(r.error_message(), HasSubstr("\"nope\" is not loaded"));
  ASSERT_TRUE(stream->Write(AddRequest("add", {5, 5, 5, 5}, {1, 1, 1, 1})));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_THAT(ToFloats(r.infer_response().raw_output_contents(1)), ElementsAre(4, 4, 4, 4));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerE2eTest, ModelConfigAndStatistics) {
  {
    grpc::ClientContext ctx;
    inference::ModelConfigRequest req;
    req.set_name("add");
    inference::ModelConfigResponse r;
    ASSERT_TRUE(stub_->ModelConfig(&ctx, req, &r).ok());
    const inference::ModelConfig& c = r.config();
    EXPECT_EQ(c.name(), "add");
    EXPECT_EQ(c.max_batch_size(), 8);
    EXPECT_TRUE(c.version_policy().has_all());
    ASSERT_EQ(c.input_size(), 2);
    EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
    EXPECT_THAT(c.input(0).dims(), ElementsAre(4));  // batch dimension left out
    ASSERT_EQ(c.instance_group_size(), 1);
    EXPECT_EQ(c.instance_group(0).count(), 2);
    EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
    EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ElementsAre(4));
    EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 50u);
  }
  inference::ModelInferResponse resp;
  inference::ModelInferRequest two_rows =
      AddRequest("add", std::vector<float>(8, 1.0f), std::vector<float>(8, 1.0f));
  ASSERT_TRUE(Infer(two_rows, &resp).ok());
  inference::ModelInferRequest bad = two_rows;
  bad.mutable_raw_input_contents(0)->resize(4);
  ASSERT_FALSE(Infer(bad, &resp).ok());
  {
    grpc::ClientContext ctx;
    inference::ModelStatisticsRequest req;
    req.set_name("add");
    req.set_version("2");
    inference::ModelStatisticsResponse r;
    ASSERT_TRUE(stub_->ModelStatistics(&ctx, req, &r).ok());
    ASSERT_EQ(r.model_stats_size(), 1);
    const inference::ModelStatistics& st = r.model_stats(0);
    EXPECT_EQ(st.name(), "add");
    EXPECT_EQ(st.version(), "2");
    EXPECT_EQ(st.inference_count(), 2u);  // one request of batch 2
    EXPECT_EQ(st.execution_count(), 1u);
    EXPECT_EQ(st.inference_stats().success().count(), 1u);
    EXPECT_EQ(st.inference_stats().fail().count(), 1u);
    EXPECT_GT(st.last_inference(), 0u);
  }
  {
    grpc::ClientContext ctx;
    inference::ModelStatisticsResponse r;
    ASSERT_TRUE(stub_->ModelStatistics(&ctx, {}, &r).ok());
    EXPECT_EQ(r.model_stats_size(), 4);  // add v1, add v2, blocking v1, echo v1
  }
}

TEST_F(ServerE2eTest, RepositoryIndexLoadAndUnload) {
  auto index = [&](bool ready) {
    grpc::ClientContext ctx;
    inference::RepositoryIndexRequest req;
    req.set_ready(ready);
    inference::RepositoryIndexResponse r;
    EXPECT_TRUE(stub_->RepositoryIndex(&ctx, req, &r).ok());
    std::vector<std::string> rows;
    for (const auto& m : r.models()) {
      rows.push_back(absl::StrCat(m.name(), "/", m.version(), "/", m.state()));
    }
    return rows;
  };
  EXPECT_THAT(index(false), ElementsAre("add/1/READY", "add/2/READY", "blocking/1/READY",
                                        "broken//", "echo/1/READY"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("broken");
    inference::RepositoryModelLoadResponse r;
    grpc::Status s = stub_->RepositoryModelLoad(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("broken model file"));
  }
  EXPECT_THAT(index(false), ::testing::Contains("broken/1/UNAVAILABLE"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name("echo");
    inference::RepositoryModelUnloadResponse r;
    ASSERT_TRUE(stub_->RepositoryModelUnload(&ctx, req, &r).ok());
  }
  EXPECT_THAT(index(true), ElementsAre("add/1/READY", "add/2/READY", "blocking/1/READY"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    inference::RepositoryModelLoadResponse r;
    ASSERT_TRUE(stub_->RepositoryModelLoad(&ctx, req, &r).ok());
  }
  EXPECT_THAT(index(true), ::testing::Contains("echo/1/READY"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["config"].set_string_param("{\"max_batch_size\": \"many\"}");
    inference::RepositoryModelLoadResponse r;
    grpc::Status s = stub_->RepositoryModelLoad(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("failed to load 'echo'"));
    EXPECT_THAT(s.error_message(), HasSubstr("config override"));
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["config"].set_string_param("{}");
    inference::RepositoryModelLoadResponse r;
    EXPECT_TRUE(stub_->RepositoryModelLoad(&ctx, req, &r).ok());
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("no_such_model");
    inference::RepositoryModelLoadResponse r;
    grpc::Status s = stub_->RepositoryModelLoad(&ctx, req, &r);
    EXPECT_THAT(s.error_message(),
                HasSubstr("failed to load 'no_such_model', failed to poll from model repository"));
  }
}

TEST_F(ServerE2eTest, UnsupportedRpcsAreUnimplemented) {
  grpc::ClientContext c1, c2, c3, c4;
  inference::CudaSharedMemoryRegisterResponse r1_cuda_;
  inference::CudaSharedMemoryRegisterRequest cuda;
  cuda.set_name("gpu0");
  grpc::Status s = stub_->CudaSharedMemoryRegister(&c1, cuda, &r1_cuda_);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("serves no GPU yet"));
  inference::CudaSharedMemoryStatusResponse r2;
  EXPECT_EQ(stub_->CudaSharedMemoryStatus(&c2, {}, &r2).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  inference::TraceSettingResponse r3;
  EXPECT_EQ(stub_->TraceSetting(&c3, {}, &r3).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  inference::LogSettingsResponse r4;
  EXPECT_EQ(stub_->LogSettings(&c4, {}, &r4).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ServerE2eTest, AdminListsAndDumpsInstances) {
  auto admin = reprise::v1::RuntimeInstances::NewStub(channel_);
  {
    grpc::ClientContext ctx;
    reprise::v1::ListInstancesRequest req;
    req.set_model("add");
    reprise::v1::ListInstancesResponse r;
    grpc::Status listed = admin->ListInstances(&ctx, req, &r);
    ASSERT_TRUE(listed.ok()) << listed.error_code() << " " << listed.error_message();
    ASSERT_EQ(r.instances_size(), 2);  // one per loaded version of the fake
    EXPECT_EQ(r.instances(1).version(), "2");
    EXPECT_EQ(r.instances(1).replays(), 2u);
    EXPECT_EQ(r.instances(1).state(), "CAPTURED");
  }
  {
    grpc::ClientContext ctx;
    reprise::v1::DumpInstanceRequest req;
    req.set_model("add");
    req.set_shape_signature("a:[1,4];b:[1,4]");
    req.set_verbose(true);
    reprise::v1::DumpInstanceResponse r;
    ASSERT_TRUE(admin->DumpInstance(&ctx, req, &r).ok());
    EXPECT_EQ(r.json(), "{\"stream\":0,\"verbose\":true}");
  }
  {
    grpc::ClientContext ctx;
    reprise::v1::DumpInstanceRequest req;
    req.set_model("add");
    req.set_stream(3);
    reprise::v1::DumpInstanceResponse r;
    grpc::Status s = admin->DumpInstance(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("stream 3"));
  }
}

// SIGTERM's path without the signal: an inference in flight finishes, new requests are refused
// with UNAVAILABLE, health says NOT_SERVING, and Shutdown reports a clean drain.
TEST_F(ServerE2eTest, GracefulShutdownFinishesInFlightRequests) {
  inference::ModelInferResponse in_flight_resp;
  grpc::Status in_flight_status;
  std::thread in_flight([&] {
    in_flight_status = Infer(AddRequest("blocking", {1, 2, 3, 4}, {1, 1, 1, 1}), &in_flight_resp);
  });
  backend_.blocker().WaitEntered(1);

  bool clean = false;
  std::thread stopper([&] { clean = server_->Shutdown(); });
  // Wait until the server has started refusing (ServerReady turns false first).
  bool ready = true;
  while (ready) {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &r).ok());
    ready = r.ready();
  }
  inference::ModelInferResponse refused_resp;
  grpc::Status refused = Infer(AddRequest("add", {1, 2, 3, 4}, {1, 1, 1, 1}), &refused_resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("shutting down"));
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  backend_.blocker().Release();
  in_flight.join();
  stopper.join();
  ASSERT_TRUE(in_flight_status.ok()) << in_flight_status.error_message();
  EXPECT_THAT(ToFloats(in_flight_resp.raw_output_contents(0)), ElementsAre(2, 3, 4, 5));
  EXPECT_TRUE(clean);
  EXPECT_EQ(backend_.live(), 0);  // every model unloaded
  server_.reset();
}

TEST(ServerLimitsTest, MessageSizeAndQueueLength) {
  REPRISE_SKIP_UNDER_TSAN();
  testing::TempRepo repo;
  repo.AddVersion("blocking", 1);
  testing::FakeBackend backend;
  config::ServerConfig config = LoopbackConfig(repo.path());
  config.max_message_bytes = 1024;
  config.max_queue_length = 1;
  auto server = *Server::Start(config, &backend);
  ASSERT_TRUE(server->WaitForStartupLoads().ok());
  auto stub = GRPCInferenceService::NewStub(ChannelTo(*server));
  auto infer = [&](const inference::ModelInferRequest& request) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    return stub->ModelInfer(&ctx, request, &response);
  };
  grpc::Status big =
      infer(AddRequest("blocking", std::vector<float>(400, 1.0f), std::vector<float>(400, 1.0f)));
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  grpc::Status first;
  std::thread in_flight([&] { first = infer(AddRequest("blocking", {1, 2, 3, 4}, {1, 2, 3, 4})); });
  backend.blocker().WaitEntered(1);
  grpc::Status second = infer(AddRequest("blocking", {1, 2, 3, 4}, {1, 2, 3, 4}));
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.error_message(), HasSubstr("max_queue_length 1"));
  backend.blocker().Release();
  in_flight.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_TRUE(server->Shutdown());
}

TEST(ServerShutdownTest, TimeoutGivesUpOnRequestsStillRunning) {
  REPRISE_SKIP_UNDER_TSAN();
  testing::TempRepo repo;
  repo.AddVersion("blocking", 1);
  testing::FakeBackend backend;
  config::ServerConfig config = LoopbackConfig(repo.path());
  config.shutdown_timeout_s = 0;
  auto server = *Server::Start(config, &backend);
  ASSERT_TRUE(server->WaitForStartupLoads().ok());
  auto stub = GRPCInferenceService::NewStub(ChannelTo(*server));
  grpc::Status stuck;
  std::thread client([&] {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    stuck = stub->ModelInfer(&ctx, AddRequest("blocking", {1, 2, 3, 4}, {1, 2, 3, 4}), &response);
  });
  backend.blocker().WaitEntered(1);
  EXPECT_FALSE(server->Shutdown());  // the request could not finish in 0 s
  grpc::ClientContext ctx;
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub->ServerReady(&ctx, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  backend.blocker().Release();  // the backend returns after all
  client.join();
  EXPECT_TRUE(stuck.ok()) << stuck.error_message();
  server.reset();  // joins the inference thread, stops gRPC
  EXPECT_EQ(backend.live(), 0);
}

TEST(ServerStartTest, MissingRepositoryFailsCleanly) {
  testing::FakeBackend backend;
  config::ServerConfig config = LoopbackConfig("/nonexistent/reprise/models");
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, &backend);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(server.status().message(), HasSubstr("/nonexistent/reprise/models"));
}

}  // namespace
}  // namespace reprise::server

namespace reprise::server {
namespace {

// An unregister while a request that writes into the region is in flight: the request keeps the
// mapping (no use after unmap) and its output lands in the object; new requests no longer find
// the region.
TEST_F(ServerE2eTest, UnregisterDuringAnInferenceKeepsItsRegionMapped) {
  const std::string key = absl::StrCat("/reprise-e2e-", getpid());
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* view = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  close(fd);
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest req;
    req.set_name("out");
    req.set_key(key);
    req.set_offset(1024);
    req.set_byte_size(64);
    inference::SystemSharedMemoryRegisterResponse r;
    ASSERT_TRUE(stub_->SystemSharedMemoryRegister(&ctx, req, &r).ok());
  }
  inference::ModelInferRequest request = AddRequest("blocking", {1, 2, 3, 4}, {10, 20, 30, 40});
  auto* out = request.add_outputs();
  out->set_name("sum");
  (*out->mutable_parameters())["shared_memory_region"].set_string_param("out");
  (*out->mutable_parameters())["shared_memory_offset"].set_int64_param(16);
  (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  inference::ModelInferResponse response;
  grpc::Status status;
  std::thread in_flight([&] { status = Infer(request, &response); });
  backend_.blocker().WaitEntered(1);
  {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterRequest req;
    req.set_name("out");
    inference::SystemSharedMemoryUnregisterResponse r;
    ASSERT_TRUE(stub_->SystemSharedMemoryUnregister(&ctx, req, &r).ok());
  }
  shm_unlink(key.c_str());  // the object lives on in the mappings
  backend_.blocker().Release();
  in_flight.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_TRUE(response.raw_output_contents(0).empty());  // written into the region only
  float sum[4];
  std::memcpy(sum, static_cast<const char*>(view) + 1024 + 16, sizeof(sum));
  EXPECT_THAT(sum, ::testing::ElementsAre(11, 22, 33, 44));
  munmap(view, 4096);
  inference::ModelInferResponse again;
  EXPECT_EQ(Infer(request, &again).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace reprise::server
