// The daemon: the gRPC server with the inference, health, reflection and admin services over a
// model repository, and its graceful shutdown.
#ifndef REPRISE_SERVER_SERVER_H_
#define REPRISE_SERVER_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <condition_variable>
#include <mutex>
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/server_config.h"
#include "grpcpp/grpcpp.h"
#include "server/access_control.h"
#include "server/admin_service.h"
#include "server/executor.h"
#include "server/guarded_inference_service.h"
#include "server/http_server.h"
#include "server/http_service.h"
#include "server/inference_service.h"
#include "server/metrics.h"
#include "server/metrics_endpoint.h"
#include "server/model_backend.h"
#include "server/model_repository.h"
#include "server/request_gate.h"
#include "server/shared_memory.h"

namespace reprise::server {

/// A running server. Start binds the port and begins the startup loads (asynchronously: the
/// server answers at once, ServerReady turns true and health SERVING once they finished; with
/// `strict_readiness`, only while every model asked for at startup is loaded).
/// Readiness is ServerReady and the gRPC health of the service "" (`kReadinessService`);
/// liveness is ServerLive and the health of `kLivenessService`, SERVING until the process ends.
/// Shutdown is graceful: readiness false first, then new requests UNAVAILABLE, in-flight
/// requests get up to `shutdown_timeout_s` to finish, then the listeners close and the models
/// are unloaded.
/// `backend` is borrowed and must outlive the server. Thread-safe.
class Server {
 public:
  static constexpr const char* kReadinessService = "";
  static constexpr const char* kLivenessService = "liveness";

  static absl::StatusOr<std::unique_ptr<Server>> Start(const config::ServerConfig& config,
                                                       ModelBackend* backend);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The port gRPC listens on (the chosen one when the config asked for 0).
  int port() const { return port_; }
  /// The port HTTP/REST is served on (the chosen one for 0); 0 when HTTP is disabled.
  int http_port() const { return http_server_ ? http_server_->port() : 0; }
  /// The port /metrics is served on (the chosen one for 0); 0 when metrics are disabled.
  int metrics_port() const { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  /// The metrics the server records (served on metrics_port()).
  Metrics& metrics() { return *metrics_; }
  /// Blocks until the startup loads finished; their first failure (the server serves anyway).
  absl::Status WaitForStartupLoads();
  /// Graceful shutdown as described above; idempotent. Returns false if requests were still
  /// running at the deadline: it then stops there (new requests stay refused), since those
  /// requests may be stuck in the backend and the destructor waits for them; a daemon should
  /// end the process instead.
  bool Shutdown();

  ModelRepository& repository() { return *repository_; }

 private:
  explicit Server(const config::ServerConfig& config);
  // The HTTP/REST endpoint: an in-process gRPC server with the same service (and no access
  // restrictions of its own: the HTTP service checks http_restricted_apis), and the listener.
  absl::Status StartHttp();
  // Sets ready_ and the readiness health status from the startup loads and the shutdown.
  void UpdateReadiness();
  void UpdateReadinessLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Poll mode: calls ModelRepository::Poll every poll_seconds until StopPoller.
  void PollLoop();
  void StopPoller();

  const config::ServerConfig config_;
  int port_ = 0;
  std::atomic<bool> ready_{false};

  // Before everything that records into it; the endpoint that reads it is the last member.
  std::unique_ptr<Metrics> metrics_;
  std::atomic<int64_t> grpc_inflight_{0};
  std::unique_ptr<ThreadPool> load_pool_;
  std::unique_ptr<ThreadPool> infer_pool_;
  std::unique_ptr<UploadArea> uploads_;                  // null: uploads turned off
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;  // null: no regions
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<RequestGate> gate_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<InferenceService> inference_service_;
  std::unique_ptr<GuardedInferenceService> guarded_inference_service_;  // the one registered
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  // HTTP/REST (StartHttp); the listener is stopped before the rest goes.
  std::unique_ptr<AccessControl> http_access_;
  std::unique_ptr<AccessControl> open_access_;
  std::unique_ptr<GuardedInferenceService> internal_guard_;
  std::unique_ptr<grpc::Server> internal_grpc_server_;
  std::unique_ptr<HttpService> http_service_;
  std::unique_ptr<HttpServer> http_server_;

  std::mutex mu_;
  std::condition_variable startup_cv_;
  bool startup_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status startup_status_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ready_ ABSL_GUARDED_BY(mu_) = false;

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool poll_stop_ ABSL_GUARDED_BY(poll_mu_) = false;
  std::thread poller_;  // poll mode only

  // Destroyed first: no scrape reads the repository or the backend once they go.
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_SERVER_H_
