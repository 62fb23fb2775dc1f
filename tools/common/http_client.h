// The HTTP/REST side of Reprise's client tools (reprise -i http, reprise-bench -i http): one
// blocking keep-alive HTTP/1.1 connection speaking the KServe v2 REST protocol, with the gRPC
// messages as its requests and answers (server/http_codec.h does the bodies), so that a tool
// runs the same code on either protocol. Plain TCP only (TLS: through a proxy). Not
// thread-safe: one client per thread.
#ifndef REPRISE_TOOLS_COMMON_HTTP_CLIENT_H_
#define REPRISE_TOOLS_COMMON_HTTP_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpc_service.pb.h"

namespace reprise::tools {

/// One answer: status, headers (names in lower case) and body.
struct HttpResult {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<std::string> Header(absl::string_view name) const;
};

class HttpClient {
 public:
  /// Connects to "HOST:PORT" (an IPv4 / IPv6 address or a name). `headers` go with every
  /// request (-H).
  static absl::StatusOr<std::unique_ptr<HttpClient>> Connect(
      const std::string& addr, std::vector<std::pair<std::string, std::string>> headers = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// One request on the connection (reconnecting once if the server closed it).
  absl::StatusOr<HttpResult> Request(
      absl::string_view method, absl::string_view path, absl::string_view body = "",
      const std::vector<std::pair<std::string, std::string>>& extra_headers = {});

  // The KServe v2 calls. A non-2xx answer is an error whose code follows the HTTP status (as
  // the server maps them, server/http_service.h) with the body's "error" message.
  absl::StatusOr<bool> Live();
  absl::StatusOr<bool> Ready();
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string& model);
  absl::StatusOr<inference::RepositoryIndexResponse> RepositoryIndex();
  absl::Status LoadOrUnload(bool load, const std::string& model);
  absl::StatusOr<inference::ModelStatisticsResponse> ModelStatistics(const std::string& model);
  /// Inputs from raw_input_contents; `binary`: inputs and outputs as binary data, else JSON.
  absl::StatusOr<inference::ModelInferResponse> ModelInfer(
      const inference::ModelInferRequest& request, bool binary);
  /// The parts of ModelInfer, for callers that time them (reprise-bench): the request's path,
  /// and the answer to an infer request decoded (an error for a non-2xx one).
  static std::string InferPath(const inference::ModelInferRequest& request);
  static absl::StatusOr<inference::ModelInferResponse> InferResponse(const HttpResult& result);

 private:
  HttpClient(std::string host, std::string port,
             std::vector<std::pair<std::string, std::string>> headers);
  absl::Status Open();
  absl::StatusOr<HttpResult> Exchange(const std::string& request);

  const std::string host_;
  const std::string port_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  int fd_ = -1;
  std::string buffer_;  // bytes read past the last answer
};

}  // namespace reprise::tools

#endif  // REPRISE_TOOLS_COMMON_HTTP_CLIENT_H_
