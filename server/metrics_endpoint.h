// The HTTP endpoint of the metrics: GET /metrics on its own port (our HTTP listener,
// server/http_server.h, with one I/O thread).
#ifndef REPRISE_SERVER_METRICS_ENDPOINT_H_
#define REPRISE_SERVER_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics.h"

namespace reprise::server {

/// The HTTP endpoint serving GET /metrics in the text exposition format (version 0.0.4).
/// Serves the collectables `metrics` had when Start was called, sharing their
/// ownership; what they read (the repository, the backend) must outlive the endpoint. Stops in
/// the destructor.
class MetricsEndpoint {
 public:
  /// Binds `address`:`port` (0: a free port). UNAVAILABLE naming the address when it cannot;
  /// INVALID_ARGUMENT when `address` is no IP address.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address,
                                                                int port, Metrics* metrics);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  /// The port bound (the chosen one when 0 was asked for).
  int port() const { return port_; }

 private:
  struct Impl;
  MetricsEndpoint(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_METRICS_ENDPOINT_H_
