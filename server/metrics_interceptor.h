// A gRPC server interceptor that counts the calls in flight (reprise_grpc_server_inflight_calls).
#ifndef REPRISE_SERVER_METRICS_INTERCEPTOR_H_
#define REPRISE_SERVER_METRICS_INTERCEPTOR_H_

#include <atomic>
#include <cstdint>

#include "grpcpp/support/server_interceptor.h"

namespace reprise::server {

/// gRPC makes one interceptor per call when the call starts and destroys it when the call is
/// done, so the count is interceptors alive. `inflight` is borrowed and must outlive every call
/// of the server the factory is given to. Thread-safe.
class InflightCallsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit InflightCallsInterceptorFactory(std::atomic<int64_t>* inflight) : inflight_(inflight) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::atomic<int64_t>* const inflight_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_METRICS_INTERCEPTOR_H_
