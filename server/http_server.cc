// The only file that includes Boost.Beast / Asio (they are heavy to compile).
#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/http_codec.h"
#include "spdlog/spdlog.h"

namespace reprise::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr uint32_t kMaxHeaderBytes = 64 * 1024;

// One connection: read a request, hand it to the service, write its answer, read the next.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpHandler* service, const HttpServerOptions& options,
          std::atomic<int64_t>* body_bytes)
      : stream_(std::move(socket)), service_(service), options_(options), body_bytes_(body_bytes) {}
  ~Session() { Release(); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    parser_->header_limit(kMaxHeaderBytes);
    stream_.expires_after(absl::ToChronoSeconds(options_.read_timeout));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The body is read only within the server-wide budget of body bytes in flight (a body's
  // buffer is reserved from its Content-Length; a chunked body counts as the largest one).
  void OnHeader(beast::error_code ec) {
    if (ec) return OnRead(ec);
    const int64_t want = parser_->content_length().has_value()
                             ? static_cast<int64_t>(*parser_->content_length())
                             : options_.max_body_bytes;
    if (body_bytes_->fetch_add(want) + want > options_.max_inflight_body_bytes) {
      body_bytes_->fetch_sub(want);
      return Fail(503, absl::StrCat("the server has too many request bytes in flight (",
                                    options_.max_inflight_body_bytes, "); retry later"));
    }
    charged_ = want;
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code error, size_t) { self->OnRead(error); });
  }

  void Release() {
    if (charged_ > 0) body_bytes_->fetch_sub(charged_);
    charged_ = 0;
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      const bool started = parser_.has_value() && parser_->got_some();
      if (ec == http::error::body_limit) {
        return Fail(413, absl::StrCat("the body is larger than the limit of ",
                                      options_.max_body_bytes, " bytes"));
      }
      if (ec == http::error::header_limit) {
        return Fail(431, absl::StrCat("the header is larger than ", kMaxHeaderBytes, " bytes"));
      }
      if (ec == beast::error::timeout) {
        if (started) return Fail(408, "the request was not received in time");
        return Close();
      }
      if (ec == http::error::end_of_stream) return Close();  // closed between requests
      if (ec.category() == http::make_error_code(http::error::partial_message).category()) {
        return Fail(400, absl::StrCat("malformed HTTP request: ", ec.message()));
      }
      return Close();  // a socket error: nobody to answer
    }
    http::request<http::string_body> msg = parser_->release();
    HttpRequest request;
    request.method = std::string(msg.method_string());
    request.target = std::string(msg.target());
    for (const auto& field : msg) {
      request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                   std::string(field.value()));
    }
    request.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    const unsigned version = msg.version();
    stream_.expires_never();
    service_->Handle(std::move(request), [self = shared_from_this(), keep_alive,
                                          version](HttpResponse response) mutable {
      auto executor = self->stream_.get_executor();
      net::post(executor,
                [self = std::move(self), response = std::move(response), keep_alive,
                 version]() mutable { self->Write(std::move(response), keep_alive, version); });
    });
  }

  // An error answer, then the connection closes (the rest of the stream cannot be trusted).
  void Fail(int status, const std::string& message) {
    HttpResponse r;
    r.status = status;
    r.body = HttpErrorBody(message);
    Write(std::move(r), /*keep_alive=*/false, 11);
  }

  void Write(HttpResponse r, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version);
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [key, value] : r.headers) res->set(key, value);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    stream_.expires_after(absl::ToChronoSeconds(options_.read_timeout));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->Release();
                        if (ec || res->need_eof()) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpHandler* const service_;
  const HttpServerOptions& options_;
  std::atomic<int64_t>* const body_bytes_;
  int64_t charged_ = 0;  // this request's share of *body_bytes_
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler* service = nullptr;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  int port = 0;
  std::atomic<int64_t> body_bytes{0};  // request bodies being read or answered

  void Accept() {
    acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        beast::error_code ignored;
        s.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(std::move(s), service, options, &body_bytes)->Start();
      }
      Accept();
    });
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler* handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->service = handler;
  const std::string where = absl::StrCat(options.address, ":", options.port);
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.address, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", options.address, "\" is not an IP address"));
  }
  impl->acceptor.emplace(impl->ioc);
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options.port));
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", ec.message()));
  }
  impl->port = impl->acceptor->local_endpoint().port();
  impl->work.emplace(impl->ioc.get_executor());
  impl->Accept();
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl->threads.emplace_back([io = &impl->ioc] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

HttpServer::~HttpServer() {
  Stop();
  beast::error_code ignored;
  impl_->acceptor->close(ignored);
  // Pending handlers (and the sessions they own) go with the io_context.
}

}  // namespace reprise::server
