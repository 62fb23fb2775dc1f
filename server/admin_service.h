// reprise.v1.RuntimeInstances: lists and dumps the runtime instances (captured shapes) of
// loaded models. Until the engine is plugged in, a backend without capture lists none.
#ifndef REPRISE_SERVER_ADMIN_SERVICE_H_
#define REPRISE_SERVER_ADMIN_SERVICE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "reprise_admin.grpc.pb.h"
#include "server/access_control.h"
#include "server/model_repository.h"

namespace reprise::server {

/// What the admin service may show (config::GrpcConfig's allow_* keys).
struct AdminOptions {
  bool allow_address_dump = false;  // verbose dumps keep host addresses
  bool allow_value_dump = false;    // listings keep the values of value-keyed signatures
};

/// `json` with every pointer value the dumps write (a JSON string "0x<hex>") replaced by
/// "redacted".
std::string RedactAddresses(absl::string_view json);
/// `signature` ("x:[1,4];k:[2]=(3,5)") with each value-key's values replaced by "redacted"
/// ("x:[1,4];k:[2]=(redacted)"): the shape stays, the client's values go.
std::string RedactKeyValues(absl::string_view signature);

/// `repository` and `access` are borrowed and must outlive the gRPC server. Every call is
/// checked against the "admin" protocol group. Thread-safe.
class AdminService final : public reprise::v1::RuntimeInstances::CallbackService {
 public:
  AdminService(ModelRepository* repository, const AccessControl* access, AdminOptions options)
      : repository_(repository), access_(access), options_(options) {}

  /// `model` empty: every loaded model; `version` empty: every loaded version.
  grpc::ServerUnaryReactor* ListInstances(grpc::CallbackServerContext* ctx,
                                          const reprise::v1::ListInstancesRequest* request,
                                          reprise::v1::ListInstancesResponse* response) override;
  grpc::ServerUnaryReactor* DumpInstance(grpc::CallbackServerContext* ctx,
                                         const reprise::v1::DumpInstanceRequest* request,
                                         reprise::v1::DumpInstanceResponse* response) override;
  /// Profiles one version on a stream of its own (LoadedModel::Profile) while holding it
  /// loaded; iterations 0 means 10, more than kMaxProfileIterations is INVALID_ARGUMENT.
  grpc::ServerUnaryReactor* ProfileModel(grpc::CallbackServerContext* ctx,
                                         const reprise::v1::ProfileModelRequest* request,
                                         reprise::v1::ProfileModelResponse* response) override;

  static constexpr int kMaxProfileIterations = 100;

 private:
  ModelRepository* const repository_;
  const AccessControl* const access_;
  const AdminOptions options_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_ADMIN_SERVICE_H_
