// The HTTP/1.1 listener of the KServe v2 REST endpoint (Boost.Beast on Asio): a few I/O
// threads serve every connection asynchronously (no thread per connection), with keep-alive
// and pipelining (requests on a connection are answered in order). Malformed requests get a
// 4xx and the connection closes; the parsed requests go to an HttpHandler (the KServe
// HttpService, or the metrics endpoint).
#ifndef REPRISE_SERVER_HTTP_SERVER_H_
#define REPRISE_SERVER_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http_service.h"

namespace reprise::server {

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  int port = 8000;                             // 0 picks a free port
  int threads = 2;                             // I/O threads
  int64_t max_body_bytes = int64_t{65} << 20;  // larger bodies get 413
  // Bodies of all connections being read or answered together; a request that would pass it
  // gets 503 (so that N connections announcing large bodies cannot reserve N of them).
  int64_t max_inflight_body_bytes = int64_t{1} << 30;
  absl::Duration read_timeout = absl::Seconds(60);  // to read one request, and idle keep-alive
};

/// A running listener. `handler` is borrowed and must outlive the server. Thread-safe.
class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler* handler);
  /// Stops (see Stop) and closes every connection. Answers still to come from `handler` must
  /// have arrived: call Stop, then wait for them (HttpService::WaitIdle), then destroy.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The port listened on (the chosen one for 0).
  int port() const;
  /// Stops the I/O threads: no connection is read or written any more, and HttpHandler::Handle
  /// is no longer called. Idempotent; the destructor calls it.
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_HTTP_SERVER_H_
