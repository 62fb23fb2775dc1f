#include "server/metrics_endpoint.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "server/http_server.h"

namespace reprise::server {
namespace {

// GET (or HEAD) /metrics: the text exposition format; anything else is refused.
class MetricsHandler final : public HttpHandler {
 public:
  explicit MetricsHandler(std::vector<std::shared_ptr<prometheus::Collectable>> collectables)
      : collectables_(std::move(collectables)) {}

  void Handle(HttpRequest request, absl::AnyInvocable<void(HttpResponse) &&> done) override {
    HttpResponse response;
    response.content_type = "text/plain; charset=utf-8";
    absl::string_view path = request.target;
    path = path.substr(0, path.find('?'));
    if (path != "/metrics") {
      response.status = 404;
      response.body = "not found: the metrics are at /metrics\n";
    } else if (request.method != "GET" && request.method != "HEAD") {
      response.status = 405;
      response.headers.emplace_back("Allow", "GET, HEAD");
      response.body = absl::StrCat("method ", request.method, " is not allowed on /metrics\n");
    } else {
      response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      if (request.method == "GET") response.body = SerializeMetrics(collectables_);
    }
    std::move(done)(std::move(response));
  }

 private:
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
};

}  // namespace

struct MetricsEndpoint::Impl {
  std::unique_ptr<MetricsHandler> handler;
  std::unique_ptr<HttpServer> server;  // destroyed first: it calls the handler
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() = default;

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                        int port,
                                                                        Metrics* metrics) {
  auto impl = std::make_unique<Impl>();
  impl->handler = std::make_unique<MetricsHandler>(metrics->Collectables());
  HttpServerOptions options;
  options.address = address;
  options.port = port;
  options.threads = 1;  // a scraper or two
  // A scrape is a GET: no body worth reading.
  options.max_body_bytes = 64 * 1024;
  options.max_inflight_body_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, impl->handler.get());
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("cannot serve metrics: ", server.status().message()));
  }
  impl->server = *std::move(server);
  const int bound = impl->server->port();
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl), bound));
}

}  // namespace reprise::server
