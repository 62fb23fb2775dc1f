#include "server/metrics_interceptor.h"

namespace reprise::server {
namespace {

class InflightCallsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit InflightCallsInterceptor(std::atomic<int64_t>* inflight) : inflight_(inflight) {
    inflight_->fetch_add(1, std::memory_order_relaxed);
  }
  ~InflightCallsInterceptor() override { inflight_->fetch_sub(1, std::memory_order_relaxed); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  std::atomic<int64_t>* const inflight_;
};

}  // namespace

grpc::experimental::Interceptor* InflightCallsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo*) {
  return new InflightCallsInterceptor(inflight_);
}

}  // namespace reprise::server
