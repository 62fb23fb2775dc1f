#include "tools/common/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "server/http_codec.h"

namespace reprise::tools {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr int64_t kMaxBodyBytes = int64_t{1} << 32;

absl::Status StatusOfHttp(int status, absl::string_view body) {
  const std::string message = server::HttpErrorMessage(body);
  absl::StatusCode code = absl::StatusCode::kUnknown;
  switch (status) {
    case 400:
      code = absl::StatusCode::kInvalidArgument;
      break;
    case 401:
      code = absl::StatusCode::kUnauthenticated;
      break;
    case 403:
      code = absl::StatusCode::kPermissionDenied;
      break;
    case 404:
      code = absl::StatusCode::kNotFound;
      break;
    case 413:
    case 429:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case 500:
      code = absl::StatusCode::kInternal;
      break;
    case 501:
      code = absl::StatusCode::kUnimplemented;
      break;
    case 503:
      code = absl::StatusCode::kUnavailable;
      break;
    case 504:
      code = absl::StatusCode::kDeadlineExceeded;
      break;
    default:
      break;
  }
  return absl::Status(code, absl::StrCat("HTTP ", status, ": ", message));
}

template <typename Message>
absl::StatusOr<Message> FromJson(absl::string_view json) {
  Message m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &m, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("unexpected JSON from the server: ", status.ToString()));
  }
  return m;
}

std::string Escaped(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> HttpResult::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

HttpClient::HttpClient(std::string host, std::string port,
                       std::vector<std::pair<std::string, std::string>> headers)
    : host_(std::move(host)), port_(std::move(port)), headers_(std::move(headers)) {}

HttpClient::~HttpClient() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Connect(
    const std::string& addr, std::vector<std::pair<std::string, std::string>> headers) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP address \"", addr, "\" is not HOST:PORT"));
  }
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<HttpClient> c(
      new HttpClient(std::move(host), addr.substr(colon + 1), std::move(headers)));
  if (absl::Status s = c->Open(); !s.ok()) return s;
  return c;
}

absl::Status HttpClient::Open() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buffer_.clear();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host_.c_str(), port_.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host_, ":", port_, ": ", gai_strerror(rc)));
  }
  int err = 0;
  for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fd_ = fd;
    } else {
      err = errno;
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", host_, ":", port_, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<HttpResult> HttpClient::Exchange(const std::string& request) {
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  char chunk[64 * 1024];
  auto fill = [&]() -> absl::Status {
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      return absl::UnavailableError(n == 0 ? std::string("the server closed the connection")
                                           : absl::StrCat("recv: ", std::strerror(errno)));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return absl::OkStatus();
  };
  size_t end = 0;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (buffer_.size() > kMaxHeaderBytes) return absl::InternalError("HTTP header too long");
    if (absl::Status s = fill(); !s.ok()) return s;
  }
  HttpResult result;
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(buffer_).substr(0, end), "\r\n");
  std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &result.status)) {
    return absl::InternalError(absl::StrCat("malformed HTTP status line: ", lines[0]));
  }
  int64_t length = 0;
  bool close_after = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    if (name == "content-length" &&
        (!absl::SimpleAtoi(value, &length) || length < 0 || length > kMaxBodyBytes)) {
      return absl::InternalError(absl::StrCat("bad Content-Length \"", value, "\""));
    }
    if (name == "connection" && absl::AsciiStrToLower(value) == "close") close_after = true;
    result.headers.emplace_back(std::move(name), std::move(value));
  }
  buffer_.erase(0, end + 4);
  while (static_cast<int64_t>(buffer_.size()) < length) {
    if (absl::Status s = fill(); !s.ok()) return s;
  }
  result.body = buffer_.substr(0, static_cast<size_t>(length));
  buffer_.erase(0, static_cast<size_t>(length));
  if (close_after) {
    close(fd_);
    fd_ = -1;
  }
  return result;
}

absl::StatusOr<HttpResult> HttpClient::Request(
    absl::string_view method, absl::string_view path, absl::string_view body,
    const std::vector<std::pair<std::string, std::string>>& extra_headers) {
  std::string request = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", host_, ":", port_,
                                     "\r\nContent-Length: ", body.size(), "\r\n");
  for (const auto* list : {&headers_, &extra_headers}) {
    for (const auto& [key, value] : *list) absl::StrAppend(&request, key, ": ", value, "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  if (fd_ < 0) {
    if (absl::Status s = Open(); !s.ok()) return s;
  }
  absl::StatusOr<HttpResult> result = Exchange(request);
  if (!result.ok() && result.status().code() == absl::StatusCode::kUnavailable) {
    // The server may have closed an idle keep-alive connection: one new connection.
    if (absl::Status s = Open(); !s.ok()) return s;
    result = Exchange(request);
  }
  return result;
}

absl::StatusOr<bool> HttpClient::Live() {
  absl::StatusOr<HttpResult> r = Request("GET", "/v2/health/live");
  if (!r.ok()) return r.status();
  return r->status == 200;
}

absl::StatusOr<bool> HttpClient::Ready() {
  absl::StatusOr<HttpResult> r = Request("GET", "/v2/health/ready");
  if (!r.ok()) return r.status();
  return r->status == 200;
}

absl::StatusOr<inference::ModelMetadataResponse> HttpClient::ModelMetadata(
    const std::string& model) {
  absl::StatusOr<HttpResult> r = Request("GET", absl::StrCat("/v2/models/", Escaped(model)));
  if (!r.ok()) return r.status();
  if (r->status != 200) return StatusOfHttp(r->status, r->body);
  return FromJson<inference::ModelMetadataResponse>(r->body);
}

absl::StatusOr<inference::RepositoryIndexResponse> HttpClient::RepositoryIndex() {
  absl::StatusOr<HttpResult> r = Request("POST", "/v2/repository/index", "{}");
  if (!r.ok()) return r.status();
  if (r->status != 200) return StatusOfHttp(r->status, r->body);
  return FromJson<inference::RepositoryIndexResponse>(absl::StrCat("{\"models\":", r->body, "}"));
}

absl::Status HttpClient::LoadOrUnload(bool load, const std::string& model) {
  absl::StatusOr<HttpResult> r = Request(
      "POST", absl::StrCat("/v2/repository/models/", Escaped(model), load ? "/load" : "/unload"));
  if (!r.ok()) return r.status();
  if (r->status != 200) return StatusOfHttp(r->status, r->body);
  return absl::OkStatus();
}

absl::StatusOr<inference::ModelStatisticsResponse> HttpClient::ModelStatistics(
    const std::string& model) {
  const std::string path =
      model.empty() ? "/v2/models/stats" : absl::StrCat("/v2/models/", Escaped(model), "/stats");
  absl::StatusOr<HttpResult> r = Request("GET", path);
  if (!r.ok()) return r.status();
  if (r->status != 200) return StatusOfHttp(r->status, r->body);
  return FromJson<inference::ModelStatisticsResponse>(r->body);
}

std::string HttpClient::InferPath(const inference::ModelInferRequest& request) {
  std::string path = absl::StrCat("/v2/models/", Escaped(request.model_name()));
  if (!request.model_version().empty()) {
    absl::StrAppend(&path, "/versions/", Escaped(request.model_version()));
  }
  absl::StrAppend(&path, "/infer");
  return path;
}

absl::StatusOr<inference::ModelInferResponse> HttpClient::InferResponse(const HttpResult& r) {
  if (r.status != 200) return StatusOfHttp(r.status, r.body);
  const std::optional<std::string> length = r.Header("inference-header-content-length");
  server::HttpCodecLimits limits;
  limits.max_tensor_bytes = kMaxBodyBytes;
  return server::ParseHttpInferResponse(
      r.body, length ? std::optional<absl::string_view>(*length) : std::nullopt, limits);
}

absl::StatusOr<inference::ModelInferResponse> HttpClient::ModelInfer(
    const inference::ModelInferRequest& request, bool binary) {
  absl::StatusOr<server::HttpBody> body = server::WriteHttpInferRequest(request, binary, binary);
  if (!body.ok()) return body.status();
  std::vector<std::pair<std::string, std::string>> extra;
  if (body->header_length) {
    extra.emplace_back("Inference-Header-Content-Length", std::to_string(*body->header_length));
  }
  absl::StatusOr<HttpResult> r = Request("POST", InferPath(request), body->body, extra);
  if (!r.ok()) return r.status();
  return InferResponse(*r);
}

}  // namespace reprise::tools
