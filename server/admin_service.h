// reprise.v1.RuntimeInstances: lists and dumps the runtime instances (captured shapes) of
// loaded models. Until the engine is plugged in, a backend without capture lists none.
#ifndef REPRISE_SERVER_ADMIN_SERVICE_H_
#define REPRISE_SERVER_ADMIN_SERVICE_H_

#include "grpcpp/grpcpp.h"
#include "reprise_admin.grpc.pb.h"
#include "server/model_repository.h"

namespace reprise::server {

/// `repository` is borrowed and must outlive the gRPC server. Thread-safe.
class AdminService final : public reprise::v1::RuntimeInstances::CallbackService {
 public:
  explicit AdminService(ModelRepository* repository) : repository_(repository) {}

  /// `model` empty: every loaded model; `version` empty: every loaded version.
  grpc::ServerUnaryReactor* ListInstances(grpc::CallbackServerContext* ctx,
                                          const reprise::v1::ListInstancesRequest* request,
                                          reprise::v1::ListInstancesResponse* response) override;
  grpc::ServerUnaryReactor* DumpInstance(grpc::CallbackServerContext* ctx,
                                         const reprise::v1::DumpInstanceRequest* request,
                                         reprise::v1::DumpInstanceResponse* response) override;

 private:
  ModelRepository* const repository_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_ADMIN_SERVICE_H_
