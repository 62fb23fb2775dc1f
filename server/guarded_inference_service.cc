#include "server/guarded_inference_service.h"

namespace reprise::server {
namespace {

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// A stream refused before it starts: finishes at once, deletes itself when gRPC is done.
class RefusedStream final : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                           inference::ModelStreamInferResponse> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status GuardedInferenceService::Admit(grpc::CallbackServerContext* ctx,
                                            ProtocolGroup group) const {
  if (group == ProtocolGroup::kModelRepository && !options_.model_repository_service) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "the model-repository service is turned off on this server "
                        "(grpc.model_repository_service)");
  }
  grpc::Status status = access_->Check(*ctx, group);
  if (status.ok() && group == ProtocolGroup::kInference && options_.infer_compression) {
    ctx->set_compression_level(*options_.infer_compression);
  }
  return status;
}

#define REPRISE_GUARDED_UNARY(Method, Group)                                               \
  grpc::ServerUnaryReactor* GuardedInferenceService::Method(                               \
      grpc::CallbackServerContext* ctx, const inference::Method##Request* request,         \
      inference::Method##Response* response) {                                             \
    if (grpc::Status s = Admit(ctx, ProtocolGroup::Group); !s.ok()) return Refuse(ctx, s); \
    return inner_->Method(ctx, request, response);                                         \
  }

// Triton's grouping of the RPCs (src/grpc/grpc_server.cc).
REPRISE_GUARDED_UNARY(ServerLive, kHealth)
REPRISE_GUARDED_UNARY(ServerReady, kHealth)
REPRISE_GUARDED_UNARY(ModelReady, kHealth)
REPRISE_GUARDED_UNARY(ServerMetadata, kMetadata)
REPRISE_GUARDED_UNARY(ModelMetadata, kMetadata)
REPRISE_GUARDED_UNARY(ModelInfer, kInference)
REPRISE_GUARDED_UNARY(ModelConfig, kModelConfig)
REPRISE_GUARDED_UNARY(ModelStatistics, kStatistics)
REPRISE_GUARDED_UNARY(RepositoryIndex, kModelRepository)
REPRISE_GUARDED_UNARY(RepositoryModelLoad, kModelRepository)
REPRISE_GUARDED_UNARY(RepositoryModelUnload, kModelRepository)
REPRISE_GUARDED_UNARY(SystemSharedMemoryStatus, kSharedMemory)
REPRISE_GUARDED_UNARY(SystemSharedMemoryRegister, kSharedMemory)
REPRISE_GUARDED_UNARY(SystemSharedMemoryUnregister, kSharedMemory)
REPRISE_GUARDED_UNARY(CudaSharedMemoryStatus, kSharedMemory)
REPRISE_GUARDED_UNARY(CudaSharedMemoryRegister, kSharedMemory)
REPRISE_GUARDED_UNARY(CudaSharedMemoryUnregister, kSharedMemory)
REPRISE_GUARDED_UNARY(TraceSetting, kTrace)
REPRISE_GUARDED_UNARY(LogSettings, kLogging)
#undef REPRISE_GUARDED_UNARY

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GuardedInferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  if (grpc::Status s = Admit(ctx, ProtocolGroup::kInference); !s.ok()) {
    return new RefusedStream(s);
  }
  return inner_->ModelStreamInfer(ctx);
}

}  // namespace reprise::server
