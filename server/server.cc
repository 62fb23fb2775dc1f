#include "server/server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
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
#include "server/tls_credentials.h"
#include "spdlog/spdlog.h"

#ifndef REPRISE_VERSION
#define REPRISE_VERSION "0.0.0"
#endif

namespace reprise::server {
namespace {

// grpc.memory_quota_bytes as used: the configured value, or a quarter of the machine's memory.
int64_t MemoryQuotaBytes(const config::GrpcConfig& g) {
  if (g.memory_quota_bytes != 0) return g.memory_quota_bytes;
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? pages / 4 * page_size : int64_t{1} << 30;
}

// The config's gRPC limits and keepalive settings on `builder`.
void ApplyGrpcLimits(const config::ServerConfig& config, grpc::ServerBuilder* builder) {
  const config::GrpcConfig& g = config.grpc;
  const int64_t quota_bytes = MemoryQuotaBytes(g);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = g.max_threads > 0 ? g.max_threads : std::max(16, 4 * cores);
  grpc::ResourceQuota quota("reprise-grpc");
  quota.Resize(static_cast<size_t>(quota_bytes));
  quota.SetMaxThreads(threads);
  builder->SetResourceQuota(quota);
  const int64_t message_bytes = config::EffectiveMaxMessageBytes(config);
  const int64_t receive = config::EffectiveMaxReceiveMessageBytes(g, message_bytes);
  builder->SetMaxReceiveMessageSize(static_cast<int>(receive));
  builder->SetMaxSendMessageSize(static_cast<int>(message_bytes));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, g.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(g.keepalive_time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(g.keepalive_timeout));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                              g.keepalive_permit_without_calls ? 1 : 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA,
                              g.http2_max_pings_without_data);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(g.http2_min_recv_ping_interval_without_data));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, g.http2_max_ping_strikes);
  spdlog::info(
      "gRPC limits: memory quota {} bytes, {} threads, receive {} bytes, {} streams per "
      "connection",
      quota_bytes, threads, receive, g.max_concurrent_streams);
}

std::optional<grpc_compression_level> CompressionLevel(const std::string& name) {
  if (name == "low") return GRPC_COMPRESS_LEVEL_LOW;
  if (name == "medium") return GRPC_COMPRESS_LEVEL_MED;
  if (name == "high") return GRPC_COMPRESS_LEVEL_HIGH;
  return std::nullopt;
}

}  // namespace

Server::Server(const config::ServerConfig& config) : config_(config) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const config::ServerConfig& config,
                                                      ModelBackend* backend) {
  std::unique_ptr<Server> s(new Server(config));
  s->metrics_ = std::make_unique<Metrics>();
  s->load_pool_ = std::make_unique<ThreadPool>(config.load_threads, "load");
  const int infer_threads = config.cpu_threads > 0 ? config.cpu_threads : DetectCpuBudget().cpus;
  s->infer_pool_ = std::make_unique<ThreadPool>(infer_threads, "infer");

  if (config.max_uploaded_models > 0 && config.max_upload_bytes > 0) {
    UploadArea::Options upload;
    upload.root = config.upload_dir;
    upload.max_bytes = config.max_upload_bytes;
    upload.max_uploads = config.max_uploaded_models;
    absl::StatusOr<std::unique_ptr<UploadArea>> uploads = UploadArea::Create(std::move(upload));
    if (!uploads.ok()) return uploads.status();
    s->uploads_ = *std::move(uploads);
  }
  if (config.max_shared_memory_regions > 0) {
    s->shared_memory_ = std::make_unique<SharedMemoryRegistry>(
        SharedMemoryRegistry::Limits{config.max_shared_memory_regions});
  }

  ModelRepository::Options options;
  options.paths = config.model_repositories;
  options.uploads = s->uploads_.get();
  options.control_mode = config.control_mode;
  options.default_streams = config.streams_per_device;
  options.max_queue_length = config.max_queue_length;
  options.metrics = s->metrics_.get();
  options.auto_complete.enabled = config.auto_complete_config;
  options.auto_complete.default_max_batch_size = config.default_max_batch_size;
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
  info.limits.max_rank = config.max_tensor_rank;
  info.limits.max_elements = config.max_tensor_elements;
  info.limits.max_request_bytes = config.max_request_bytes;
  info.metrics = s->metrics_.get();
  info.shared_memory = s->shared_memory_.get();
  s->inference_service_ = std::make_unique<InferenceService>(
      s->repository_.get(), s->infer_pool_.get(), s->gate_.get(), &s->ready_, std::move(info));
  absl::StatusOr<std::unique_ptr<AccessControl>> access =
      AccessControl::Create(config.grpc.restricted_protocols);
  if (!access.ok()) return access.status();
  s->access_ = *std::move(access);
  GuardOptions guard;
  guard.model_repository_service = config.grpc.model_repository_service;
  guard.infer_compression = CompressionLevel(config.grpc.infer_response_compression_level);
  s->guarded_inference_service_ = std::make_unique<GuardedInferenceService>(
      s->inference_service_.get(), s->access_.get(), guard);
  if (config.grpc.admin_service) {
    s->admin_service_ = std::make_unique<AdminService>(
        s->repository_.get(), s->access_.get(),
        AdminOptions{config.grpc.allow_address_dump, config.grpc.allow_value_dump});
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(config.grpc);
  if (!credentials.ok()) return credentials.status();

  if (config.allow_metrics) {
    s->metrics_->AddCollectable(std::make_shared<MetricsCollector>(
        s->repository_.get(), backend, config.grpc_inflight_metric ? &s->grpc_inflight_ : nullptr,
        config.capture_memory_budget_bytes));
    const std::string& metrics_address =
        config.metrics_address.empty() ? config.listen_address : config.metrics_address;
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(metrics_address, config.metrics_port, s->metrics_.get());
    if (!endpoint.ok()) return endpoint.status();
    s->metrics_endpoint_ = *std::move(endpoint);
    spdlog::info("Started Metrics Service at {}:{}", metrics_address, s->metrics_endpoint_->port());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config.listen_address, ":", config.grpc_port);
  builder.AddListeningPort(address, *credentials, &s->port_);
  ApplyGrpcLimits(config, &builder);
  builder.RegisterService(s->guarded_inference_service_.get());
  if (s->admin_service_ != nullptr) builder.RegisterService(s->admin_service_.get());
  if (config.allow_metrics && config.grpc_inflight_metric) {
    // Opt-in: with any interceptor, gRPC runs its interception path for every call.
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(std::make_unique<InflightCallsInterceptorFactory>(&s->grpc_inflight_));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  s->grpc_server_ = builder.BuildAndStart();
  if (s->grpc_server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  spdlog::info("Started GRPCInferenceService at {}:{}{}", config.listen_address, s->port_,
               config.grpc.use_ssl_mutual ? " (mutual TLS)"
               : config.grpc.use_ssl      ? " (TLS)"
                                          : "");
  if (auto* health = s->grpc_server_->GetHealthCheckService()) {
    health->SetServingStatus(kReadinessService, false);
    health->SetServingStatus(kLivenessService, true);
  }

  if (config.allow_http) {
    if (absl::Status http = s->StartHttp(); !http.ok()) return http;
  }

  s->repository_->LoadAtStartup(config.load_models, [self](absl::Status status) {
    if (!status.ok()) spdlog::warn("startup load: {}", status.ToString());
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->startup_done_ = true;
      self->startup_status_ = status;
      // Readiness is settled before any waiter wakes: WaitForStartupLoads returning means the
      // server already answers ServerReady with the startup loads' outcome.
      self->UpdateReadinessLocked();
    }
    self->startup_cv_.notify_all();
  });
  if (config.control_mode == config::ControlMode::kPoll) {
    s->poller_ = std::thread([self] { self->PollLoop(); });
  }
  return s;
}

absl::Status Server::StartHttp() {
  absl::StatusOr<std::unique_ptr<AccessControl>> access =
      AccessControl::Create(config_.http_restricted_apis);
  if (!access.ok()) return access.status();
  http_access_ = *std::move(access);
  absl::StatusOr<std::unique_ptr<AccessControl>> open = AccessControl::Create({});
  if (!open.ok()) return open.status();
  open_access_ = *std::move(open);
  GuardOptions guard;
  guard.model_repository_service = config_.grpc.model_repository_service;
  internal_guard_ = std::make_unique<GuardedInferenceService>(inference_service_.get(),
                                                              open_access_.get(), guard);
  const int64_t message_bytes = config::EffectiveMaxMessageBytes(config_);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(message_bytes));
  builder.RegisterService(internal_guard_.get());
  internal_grpc_server_ = builder.BuildAndStart();
  if (internal_grpc_server_ == nullptr) return absl::InternalError("cannot start the HTTP service");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  HttpServiceOptions service_options;
  service_options.max_body_bytes = message_bytes;
  service_options.max_request_bytes = config_.max_request_bytes;
  service_options.access = http_access_.get();
  http_service_ =
      std::make_unique<HttpService>(internal_grpc_server_->InProcessChannel(args), service_options);
  HttpServerOptions options;
  options.address = config_.http_address.empty() ? config_.listen_address : config_.http_address;
  options.port = config_.http_port;
  options.threads = config_.http_threads;
  options.max_body_bytes = message_bytes;
  // The same bound as gRPC's memory quota, and at least one largest body.
  options.max_inflight_body_bytes = std::max(MemoryQuotaBytes(config_.grpc), message_bytes);
  options.read_timeout = absl::Seconds(config_.http_read_timeout_s);
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, http_service_.get());
  if (!server.ok()) return server.status();
  http_server_ = *std::move(server);
  spdlog::info("Started HTTPService at {}:{}", options.address, http_server_->port());
  return absl::OkStatus();
}

void Server::PollLoop() {
  const auto interval = std::chrono::seconds(config_.poll_seconds);
  while (true) {
    {
      std::unique_lock<std::mutex> lock(poll_mu_);
      if (poll_cv_.wait_for(lock, interval, [this] { return poll_stop_; })) return;
    }
    repository_->Poll([](absl::Status status) {
      if (!status.ok()) spdlog::warn("repository poll: {}", status.ToString());
    });
  }
}

void Server::StopPoller() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    poll_stop_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void Server::UpdateReadiness() {
  std::lock_guard<std::mutex> lock(mu_);
  UpdateReadinessLocked();
}

void Server::UpdateReadinessLocked() {
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
  StopPoller();
  Shutdown();
  if (http_server_) http_server_->Stop();  // no new HTTP requests
  // Inference and load tasks use the gRPC server and the repository: finish them first (after
  // a Shutdown that gave up, this waits for the backend to return).
  if (infer_pool_) infer_pool_->Stop();
  if (internal_grpc_server_) internal_grpc_server_->Shutdown();
  // Every answer still to come arrives now (to the stopped listener, which drops it).
  if (http_service_) http_service_->WaitIdle(absl::InfiniteFuture());
  http_server_.reset();
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
  StopPoller();                   // no poll starts a load or an unload from here on
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
  // HTTP connections close once drained (gRPC's listener closes just after).
  if (http_server_) http_server_->Stop();
  // Streams stay open until their clients close them; give them until the deadline.
  grpc_server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  if (internal_grpc_server_) {
    internal_grpc_server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  }

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
