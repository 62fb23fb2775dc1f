// Readiness and liveness of the whole server in process (127.0.0.1, ephemeral port, the fake
// backend): strict readiness keeps the server unready while a startup model failed to load,
// liveness stays SERVING throughout, and a drain turns readiness false while the listeners
// still answer.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "health.grpc.pb.h"
#include "server/server.h"
#include "tests/server/fake_backend.h"
#include "tests/server/temp_repo.h"
#include "tests/server/tsan_skip.h"

namespace reprise::server {
namespace {

using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;
using grpc::health::v1::HealthCheckResponse;

class ReadinessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REPRISE_SKIP_UNDER_TSAN();
    repo_.AddVersion("blocking", 1);
    repo_.AddVersion("broken", 1);
    backend_.FailVersion("broken", 1);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // Starts the server in explicit mode loading `load_models`; the startup loads' outcome.
  absl::Status Start(std::vector<std::string> load_models, bool strict) {
    config::ServerConfig config;
    config.listen_address = "127.0.0.1";
    config.grpc_port = 0;
    config.http_port = 0;
    config.metrics_port = 0;
    config.model_repositories = {repo_.path()};
    config.control_mode = config::ControlMode::kExplicit;
    config.load_models = std::move(load_models);
    config.strict_readiness = strict;
    config.cpu_threads = 2;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, &backend_);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
    return server_->WaitForStartupLoads();
  }

  bool Ready() {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    EXPECT_TRUE(stub_->ServerReady(&ctx, {}, &r).ok());
    return r.ready();
  }
  bool Live() {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse r;
    EXPECT_TRUE(stub_->ServerLive(&ctx, {}, &r).ok());
    return r.live();
  }
  HealthStatus Health(const std::string& service) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    grpc::Status s = health->Check(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << service << ": " << s.error_message();
    return response.status();
  }
  grpc::Status Load(const std::string& model) {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest r;
    r.set_model_name(model);
    inference::RepositoryModelLoadResponse out;
    return stub_->RepositoryModelLoad(&ctx, r, &out);
  }

  testing::TempRepo repo_;
  testing::FakeBackend backend_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(ReadinessTest, StartupModelThatFailedKeepsTheServerUnready) {
  EXPECT_FALSE(Start({"blocking", "broken"}, /*strict=*/true).ok());
  EXPECT_FALSE(Ready());
  EXPECT_EQ(Health(Server::kReadinessService), HealthCheckResponse::NOT_SERVING);
  EXPECT_TRUE(Live());
  EXPECT_EQ(Health(Server::kLivenessService), HealthCheckResponse::SERVING);
  EXPECT_EQ(server_->repository().StartupFailures(), std::vector<std::string>{"broken"});

  // Another failed attempt changes nothing; a load that succeeds makes the server ready (the
  // readiness is updated before the load's reply).
  EXPECT_FALSE(Load("broken").ok());
  EXPECT_FALSE(Ready());
  backend_.ClearFailures();
  ASSERT_TRUE(Load("broken").ok());
  EXPECT_TRUE(Ready());
  EXPECT_EQ(Health(Server::kReadinessService), HealthCheckResponse::SERVING);
  EXPECT_TRUE(server_->repository().StartupFailures().empty());
}

TEST_F(ReadinessTest, ModelNotAskedForAtStartupDoesNotCount) {
  ASSERT_TRUE(Start({"blocking"}, /*strict=*/true).ok());
  EXPECT_TRUE(Ready());
  EXPECT_FALSE(Load("broken").ok());  // a failed load by RPC is the caller's answer
  EXPECT_TRUE(Ready());
  EXPECT_EQ(Health(Server::kReadinessService), HealthCheckResponse::SERVING);
}

TEST_F(ReadinessTest, WithoutStrictReadinessAFailedStartupLoadStillEndsReady) {
  EXPECT_FALSE(Start({"blocking", "broken"}, /*strict=*/false).ok());
  EXPECT_TRUE(Ready());
  EXPECT_EQ(Health(Server::kReadinessService), HealthCheckResponse::SERVING);
}

// While a request drains, the listeners still answer: readiness is false, liveness true.
TEST_F(ReadinessTest, DrainTurnsReadinessFalseAndKeepsLiveness) {
  ASSERT_TRUE(Start({"blocking"}, /*strict=*/true).ok());
  ASSERT_TRUE(Ready());
  inference::ModelInferRequest request;
  request.set_model_name("blocking");
  for (const char* name : {"a", "b"}) {
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    request.add_raw_input_contents(std::string(16, '\0'));
  }
  grpc::Status in_flight;
  std::thread client([&] {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    in_flight = stub_->ModelInfer(&ctx, request, &response);
  });
  backend_.blocker().WaitEntered(1);
  bool clean = false;
  std::thread stopper([&] { clean = server_->Shutdown(); });
  while (Ready()) {
  }
  // The request is still held by the backend, so the drain cannot have finished.
  EXPECT_EQ(Health(Server::kReadinessService), HealthCheckResponse::NOT_SERVING);
  EXPECT_TRUE(Live());
  EXPECT_EQ(Health(Server::kLivenessService), HealthCheckResponse::SERVING);
  backend_.blocker().Release();
  client.join();
  stopper.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_TRUE(clean);
}

}  // namespace
}  // namespace reprise::server
