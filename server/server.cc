#include "server/server.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/cpu_budget.h"
#include "server/metrics_collector.h"
#include "server/metrics_interceptor.h"
#include "server/notification.h"
#include "spdlog/spdlog.h"

#ifndef REPRISE_VERSION
#define REPRISE_VERSION "0.0.0"
#endif

namespace reprise::server {

Server::Server(const config::ServerConfig& config, ModelBackend* backend)
    : config_(config), backend_(backend) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const config::ServerConfig& config,
                                                      ModelBackend* backend) {
  std::unique_ptr<Server> s(new Server(config, backend));
  s->metrics_ = std::make_unique<Metrics>();
  s->load_pool_ = std::make_unique<ThreadPool>(config.load_threads, "load");
  const int infer_threads = config.cpu_threads > 0 ? config.cpu_threads : DetectCpuBudget().cpus;
  s->infer_pool_ = std::make_unique<ThreadPool>(infer_threads, "infer");

  ModelRepository::Options options;
  options.paths = config.model_repositories;
  options.control_mode = config.control_mode;
  options.default_streams = config.streams_per_device;
  options.max_queue_length = config.max_queue_length;
  options.metrics = s->metrics_.get();
  Server* self = s.get();
  // A load by RPC can fix a failed startup load (strict readiness).
  options.on_load_finished = [self] { self->UpdateReadiness(); };
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Create(std::move(options), backend, s->load_pool_.get());
  if (!repository.ok()) return repository.status();
  s->repository_ = *std::move(repository);
  s->gate_ = std::make_unique<RequestGate>(config.max_queue_length);

  ServiceInfo info;
  info.version = REPRISE_VERSION;
  info.request_timeout = absl::Milliseconds(config.request_timeout_ms);
  info.metrics = s->metrics_.get();
  s->inference_service_ = std::make_unique<InferenceService>(
      s->repository_.get(), s->infer_pool_.get(), s->gate_.get(), &s->ready_, std::move(info));
  s->admin_service_ = std::make_unique<AdminService>(s->repository_.get());

  if (config.allow_metrics) {
    s->metrics_->AddCollectable(std::make_shared<MetricsCollector>(
        s->repository_.get(), backend, &s->grpc_inflight_, config.capture_memory_budget_bytes));
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(config.listen_address, config.metrics_port, s->metrics_.get());
    if (!endpoint.ok()) return endpoint.status();
    s->metrics_endpoint_ = *std::move(endpoint);
    spdlog::info("Started Metrics Service at {}:{}", config.listen_address,
                 s->metrics_endpoint_->port());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config.listen_address, ":", config.grpc_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  builder.RegisterService(s->inference_service_.get());
  builder.RegisterService(s->admin_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<InflightCallsInterceptorFactory>(&s->grpc_inflight_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  s->grpc_server_ = builder.BuildAndStart();
  if (s->grpc_server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  spdlog::info("Started GRPCInferenceService at {}:{}", config.listen_address, s->port_);
  if (auto* health = s->grpc_server_->GetHealthCheckService()) {
    health->SetServingStatus(kReadinessService, false);
    health->SetServingStatus(kLivenessService, true);
  }

  s->repository_->LoadAtStartup(config.load_models, [self](absl::Status status) {
    if (!status.ok()) spdlog::warn("startup load: {}", status.ToString());
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->startup_done_ = true;
      self->startup_status_ = status;
      self->startup_cv_.notify_all();
    }
    self->UpdateReadiness();
  });
  return s;
}

void Server::UpdateReadiness() {
  std::lock_guard<std::mutex> lock(mu_);
  // Before the startup loads finished nothing is ready, and grpc_server_ may still be being set.
  if (!startup_done_) return;
  std::vector<std::string> failed;
  if (config_.strict_readiness) failed = repository_->StartupFailures();
  const bool ready = !shut_down_ && failed.empty();
  ready_.store(ready);
  if (auto* health = grpc_server_->GetHealthCheckService()) {
    health->SetServingStatus(kReadinessService, ready);
  }
  if (ready && !reported_ready_) {
    spdlog::info("server ready");
  } else if (!ready && !shut_down_) {
    spdlog::warn("server not ready (strict readiness): startup models not loaded: {}",
                 absl::StrJoin(failed, ", "));
  }
  reported_ready_ = ready;
}

Server::~Server() {
  Shutdown();
  // Inference and load tasks use the gRPC server and the repository: finish them first (after
  // a Shutdown that gave up, this waits for the backend to return).
  if (infer_pool_) infer_pool_->Stop();
  if (grpc_server_) grpc_server_->Shutdown();  // a no-op after a complete Shutdown
  if (load_pool_) load_pool_->Stop();
}

absl::Status Server::WaitForStartupLoads() {
  std::unique_lock<std::mutex> lock(mu_);
  startup_cv_.wait(lock, [this] { return startup_done_; });
  return startup_status_;
}

bool Server::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return true;
    shut_down_ = true;
  }
  if (grpc_server_ == nullptr) {  // Start failed part way: nothing was served
    if (infer_pool_) infer_pool_->Stop();
    if (load_pool_) load_pool_->Stop();
    return true;
  }
  spdlog::info("shutting down: not ready, refusing new requests, {} in flight", gate_->in_flight());
  // Readiness goes first, while the listeners still answer (liveness stays SERVING).
  ready_.store(false);
  if (auto* health = grpc_server_->GetHealthCheckService()) {
    health->SetServingStatus(kReadinessService, false);
  }
  gate_->Close();
  const absl::Time deadline = absl::Now() + absl::Seconds(config_.shutdown_timeout_s);
  const bool drained = gate_->WaitIdle(deadline);
  if (!drained) {
    // Requests still running may be stuck in the backend. gRPC's Shutdown would wait for their
    // reactors too, so stop here; the caller ends the process (see the header).
    spdlog::warn("shutdown: {} requests still in flight after {} s; giving up on them",
                 gate_->in_flight(), config_.shutdown_timeout_s);
    return false;
  }
  // Streams stay open until their clients close them; give them until the deadline.
  grpc_server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));

  Notification unloaded;
  repository_->UnloadAll([&unloaded](absl::Status) { unloaded.Notify(); });
  // Finishing the inference work releases every lease; the load pool then runs the unloads.
  infer_pool_->Stop();
  if (!unloaded.WaitForNotificationWithDeadline(
          std::max(deadline, absl::Now() + absl::Seconds(1)))) {
    spdlog::warn("shutdown: models still unloading at the deadline");
  }
  load_pool_->Stop();
  unloaded.WaitForNotification();
  grpc_server_->Wait();
  spdlog::info("shutdown complete");
  return drained;
}

}  // namespace reprise::server
