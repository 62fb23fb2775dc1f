// GRPCInferenceService with access control in front: each RPC is checked against its protocol
// group (AccessControl) before the real service sees it; the model-repository RPCs can be
// turned off; infer responses get the configured compression level.
#ifndef REPRISE_SERVER_GUARDED_INFERENCE_SERVICE_H_
#define REPRISE_SERVER_GUARDED_INFERENCE_SERVICE_H_

#include <optional>

#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/access_control.h"

namespace reprise::server {

struct GuardOptions {
  bool model_repository_service = true;  // false: the repository RPCs answer UNIMPLEMENTED
  std::optional<grpc_compression_level> infer_compression;  // unset: gRPC's default
};

/// Registered with gRPC instead of `inner`. `inner` and `access` are borrowed and must outlive
/// the gRPC server. Thread-safe.
class GuardedInferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  GuardedInferenceService(inference::GRPCInferenceService::CallbackService* inner,
                          const AccessControl* access, GuardOptions options)
      : inner_(inner), access_(access), options_(options) {}

// One unary RPC: checked against `group`, then passed on.
#define REPRISE_GUARDED_UNARY(Method)                                         \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx,          \
                                   const inference::Method##Request* request, \
                                   inference::Method##Response* response) override;

  REPRISE_GUARDED_UNARY(ServerLive)
  REPRISE_GUARDED_UNARY(ServerReady)
  REPRISE_GUARDED_UNARY(ModelReady)
  REPRISE_GUARDED_UNARY(ServerMetadata)
  REPRISE_GUARDED_UNARY(ModelMetadata)
  REPRISE_GUARDED_UNARY(ModelInfer)
  REPRISE_GUARDED_UNARY(ModelConfig)
  REPRISE_GUARDED_UNARY(ModelStatistics)
  REPRISE_GUARDED_UNARY(RepositoryIndex)
  REPRISE_GUARDED_UNARY(RepositoryModelLoad)
  REPRISE_GUARDED_UNARY(RepositoryModelUnload)
  REPRISE_GUARDED_UNARY(SystemSharedMemoryStatus)
  REPRISE_GUARDED_UNARY(SystemSharedMemoryRegister)
  REPRISE_GUARDED_UNARY(SystemSharedMemoryUnregister)
  REPRISE_GUARDED_UNARY(CudaSharedMemoryStatus)
  REPRISE_GUARDED_UNARY(CudaSharedMemoryRegister)
  REPRISE_GUARDED_UNARY(CudaSharedMemoryUnregister)
  REPRISE_GUARDED_UNARY(TraceSetting)
  REPRISE_GUARDED_UNARY(LogSettings)
#undef REPRISE_GUARDED_UNARY

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* ctx) override;

 private:
  // OK, or the status the call is refused with.
  grpc::Status Admit(grpc::CallbackServerContext* ctx, ProtocolGroup group) const;

  inference::GRPCInferenceService::CallbackService* const inner_;
  const AccessControl* const access_;
  const GuardOptions options_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_GUARDED_INFERENCE_SERVICE_H_
