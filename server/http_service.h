// The routes of the KServe v2 REST protocol (and Triton's HTTP extensions), translated to the
// gRPC service's messages and served by the same service through an in-process gRPC channel:
// validation, limits, batching, statistics, metrics and errors are the gRPC path's. Knows no
// sockets: HttpServer (http_server.h) feeds it parsed requests.
#ifndef REPRISE_SERVER_HTTP_SERVICE_H_
#define REPRISE_SERVER_HTTP_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/access_control.h"

namespace reprise::server {

/// One HTTP request as the transport read it.
struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;

  /// The first value of header `name` (lower case).
  std::optional<absl::string_view> Header(absl::string_view name) const;
};

/// The answer to one HttpRequest.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// What an HttpServer hands its requests to.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  /// Answers `request` by calling `done` exactly once (on any thread).
  virtual void Handle(HttpRequest request, absl::AnyInvocable<void(HttpResponse) &&> done) = 0;
};

/// The HTTP status for a status code, as Triton's REST endpoint maps its errors
/// (docs/http.md lists them).
int HttpStatusOf(absl::StatusCode code);

/// An error response: HttpStatusOf(status) with body {"error": message}.
HttpResponse ErrorResponse(const absl::Status& status);

struct HttpServiceOptions {
  int64_t max_body_bytes = int64_t{65} << 20;     // a body, and an inflated body, at most
  int64_t max_request_bytes = int64_t{64} << 20;  // tensor data (limits.max_request_bytes)
  const AccessControl* access = nullptr;          // borrowed; null: nothing restricted
};

/// Routes requests to `channel` (an in-process channel of the server's gRPC service).
/// Thread-safe; Handle may be called from any thread and answers on a gRPC thread or the
/// calling one.
class HttpService final : public HttpHandler {
 public:
  HttpService(std::shared_ptr<grpc::Channel> channel, HttpServiceOptions options);

  /// Answers `request` by calling `done` exactly once.
  void Handle(HttpRequest request, absl::AnyInvocable<void(HttpResponse) &&> done) override;

  /// Waits until no Handle call is still to call its `done` (or `deadline`); false at the
  /// deadline.
  bool WaitIdle(absl::Time deadline);

  /// A matched route (defined in the .cc).
  struct Route;

 private:
  template <typename Req, typename Resp, typename Start, typename Finish>
  void Call(std::unique_ptr<Req> request, Start start, Finish finish,
            absl::AnyInvocable<void(HttpResponse) &&> done);
  void Infer(HttpRequest request, const Route& route,
             absl::AnyInvocable<void(HttpResponse) &&> done);
  void Finished();

  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const HttpServiceOptions options_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_HTTP_SERVICE_H_
