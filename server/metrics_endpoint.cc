#include "server/metrics_endpoint.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace reprise::server {

struct MetricsEndpoint::Impl {
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;  // kept alive
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() = default;

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                        int port,
                                                                        Metrics* metrics) {
  // civetweb spells IPv6 addresses in brackets.
  const std::string host = address.find(':') != std::string::npos && address.front() != '['
                               ? "[" + address + "]"
                               : address;
  const std::string bind = absl::StrCat(host, ":", port);
  auto impl = std::make_unique<Impl>();
  try {
    // Two worker threads serve a scraper or two; civetweb would start 50.
    impl->exposer = std::make_unique<prometheus::Exposer>(bind, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", bind, ": ", e.what()));
  }
  impl->collectables = metrics->Collectables();
  for (const auto& c : impl->collectables) impl->exposer->RegisterCollectable(c, "/metrics");
  const std::vector<int> ports = impl->exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", bind));
  }
  const int bound = ports.front();
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl), bound));
}

}  // namespace reprise::server
