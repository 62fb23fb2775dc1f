// inference.GRPCInferenceService on gRPC's callback API: thin adapters from the protocol to the
// model repository and the backend, with one status mapping (absl codes are gRPC codes).
#ifndef REPRISE_SERVER_INFERENCE_SERVICE_H_
#define REPRISE_SERVER_INFERENCE_SERVICE_H_

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/executor.h"
#include "server/infer_codec.h"
#include "server/logging.h"
#include "server/metrics.h"
#include "server/model_repository.h"
#include "server/request_gate.h"
#include "server/shared_memory.h"

namespace reprise::server {

/// An absl::Status as a grpc::Status (same codes, same message).
grpc::Status ToGrpcStatus(const absl::Status& status);

/// What the service reports about the server.
struct ServiceInfo {
  std::string name = "reprise";
  std::string version;
  absl::Duration request_timeout = absl::ZeroDuration();  // zero: none
  RequestLimits limits;        // what one request may ask for (config `limits`)
  Metrics* metrics = nullptr;  // borrowed, outlives the service; null: nothing recorded
  /// System shared-memory regions; borrowed, outlives the service. Null: the RPCs answer
  /// UNIMPLEMENTED and requests cannot name regions.
  SharedMemoryRegistry* shared_memory = nullptr;
};

/// Serves every RPC of GRPCInferenceService. Inference runs on `infer_executor`, never on a
/// gRPC thread; loads and unloads finish their RPC from the repository's callback.
/// `repository`, `infer_executor`, `gate` and `ready` are borrowed and must outlive the gRPC
/// server that serves this service. Thread-safe.
class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  /// `ready` is read by ServerReady (set by the server once the startup loads finished).
  InferenceService(ModelRepository* repository, Executor* infer_executor, RequestGate* gate,
                   const std::atomic<bool>* ready, ServiceInfo info);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* ctx, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse* response) override;

  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest*,
      inference::SystemSharedMemoryStatusResponse*) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest*,
      inference::SystemSharedMemoryRegisterResponse*) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest*,
      inference::SystemSharedMemoryUnregisterResponse*) override;
  // Declared by the protocol, not supported: UNIMPLEMENTED with a message that says so.
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest*,
      inference::CudaSharedMemoryStatusResponse*) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest*,
      inference::CudaSharedMemoryRegisterResponse*) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
      inference::CudaSharedMemoryUnregisterResponse*) override;
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx,
                                         const inference::TraceSettingRequest*,
                                         inference::TraceSettingResponse*) override;
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx,
                                        const inference::LogSettingsRequest*,
                                        inference::LogSettingsResponse*) override;

  /// Runs one inference: decodes and validates on the calling thread (the RPC's), then calls
  /// the model there (or from the inference pool, for a model that may block:
  /// LoadedModel::InfersWithoutBlocking), and calls `done` once `response` is filled (or with
  /// the error), on this thread or on the model's worker. `request` and `response` must stay alive
  /// until then. Used by unary and stream RPCs.
  void InferAsync(const inference::ModelInferRequest& request,
                  inference::ModelInferResponse* response, absl::Time deadline,
                  absl::AnyInvocable<void(absl::Status) &&> done);

 private:
  class StreamReactor;
  struct Call;
  // Counts the call in its version's statistics and the metrics, releases the version, then
  // runs `done`.
  void Complete(std::unique_ptr<Call> call, absl::Status status);
  // Metrics and the rate-limited log line of one finished (or refused) inference request.
  void RecordOutcome(absl::string_view model, absl::string_view version, const absl::Status& status,
                     absl::Duration duration);

  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status);
  grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* ctx,
                                          absl::string_view feature);
  absl::Time DeadlineOf(grpc::CallbackServerContext* ctx) const;

  ModelRepository* const repository_;
  Executor* const infer_executor_;
  RequestGate* const gate_;
  const std::atomic<bool>* const ready_;
  const ServiceInfo info_;
  RejectedRequestLog rejected_log_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_INFERENCE_SERVICE_H_
