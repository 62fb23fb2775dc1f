#include "server/http_service.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rapidjson/document.h"
#include "server/http_codec.h"
#include "server/http_compression.h"
#include "server/http_json.h"

namespace reprise::server {
namespace {

using rapidjson::Value;

enum class Kind {
  kLive,
  kReady,
  kServerMetadata,
  kModelMetadata,
  kModelReady,
  kInfer,
  kConfig,
  kModelStats,
  kRepositoryIndex,
  kLoad,
  kUnload,
  kShmStatus,
  kShmRegister,
  kShmUnregister,
};

// "%2F" and the like decoded; nullopt for a malformed escape.
std::optional<std::string> PercentDecode(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const std::string hex(s.substr(i + 1, 2));
    if (!absl::ascii_isxdigit(hex[0]) || !absl::ascii_isxdigit(hex[1])) return std::nullopt;
    out.push_back(static_cast<char>(std::stoi(hex, nullptr, 16)));
    i += 2;
  }
  return out;
}

HttpResponse Json(std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  return r;
}

// 200 with an empty body for true, 400 for false (the protocol's health answers).
HttpResponse Health(bool yes) {
  HttpResponse r;
  r.status = yes ? 200 : 400;
  r.content_type.clear();
  return r;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// An optional JSON object body ("" = {}).
absl::Status ParseBodyObject(absl::string_view body, absl::string_view what,
                             rapidjson::Document* doc) {
  if (absl::StripAsciiWhitespace(body).empty()) {
    doc->SetObject();
    return absl::OkStatus();
  }
  if (absl::Status s = ParseJson(body, what, doc); !s.ok()) return s;
  if (!doc->IsObject()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the body must be a JSON object"));
  }
  return absl::OkStatus();
}

// The load / unload body's "parameters": strings (base64 content for "file:" keys), booleans and
// integers.
absl::Status ReadRepositoryParameters(
    const rapidjson::Document& doc, absl::string_view what,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* out) {
  for (const auto& m : doc.GetObject()) {
    const absl::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key != "parameters") {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown key \"", key, "\""));
    }
    if (!m.value.IsObject()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"parameters\" must be an object"));
    }
    for (const auto& p : m.value.GetObject()) {
      const std::string name(p.name.GetString(), p.name.GetStringLength());
      inference::ModelRepositoryParameter& param = (*out)[name];
      if (p.value.IsString()) {
        const absl::string_view text(p.value.GetString(), p.value.GetStringLength());
        if (absl::StartsWith(name, "file:")) {
          std::string bytes;
          if (!absl::Base64Unescape(text, &bytes)) {
            return absl::InvalidArgumentError(
                absl::StrCat(what, ": parameter \"", name, "\" is not base64"));
          }
          param.set_bytes_param(std::move(bytes));
        } else {
          param.set_string_param(std::string(text));
        }
      } else if (p.value.IsBool()) {
        param.set_bool_param(p.value.GetBool());
      } else if (p.value.IsInt64()) {
        param.set_int64_param(p.value.GetInt64());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(what, ": parameter \"", name, "\" is ",
                                                       JsonTypeName(p.value),
                                                       ", expected a string, boolean or integer"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct HttpService::Route {
  Kind kind;
  const char* method;
  ProtocolGroup group;
  std::string model;
  std::string version;
  std::string region;
};

namespace {

// The route of `path` (no query); NOT_FOUND for none.
absl::StatusOr<HttpService::Route> Match(absl::string_view path);

}  // namespace

std::optional<absl::string_view> HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
      return 500;
    default:  // invalid argument, failed precondition, out of range, cancelled, ...
      return 400;
  }
}

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse r;
  r.status = HttpStatusOf(status.code());
  r.body = HttpErrorBody(status.message());
  return r;
}

HttpService::HttpService(std::shared_ptr<grpc::Channel> channel, HttpServiceOptions options)
    : stub_(inference::GRPCInferenceService::NewStub(std::move(channel))), options_(options) {}

void HttpService::Finished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--pending_ == 0) idle_cv_.notify_all();
}

bool HttpService::WaitIdle(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, absl::ToChronoTime(deadline), [&] { return pending_ == 0; });
}

// One unary call on the stub: `start(async, ctx, request, response, callback)` starts it,
// `finish(response)` turns the OK response into the HTTP answer; errors become error bodies.
template <typename Req, typename Resp, typename Start, typename Finish>
void HttpService::Call(std::unique_ptr<Req> request, Start start, Finish finish,
                       absl::AnyInvocable<void(HttpResponse) &&> done) {
  struct State {
    grpc::ClientContext ctx;
    std::unique_ptr<Req> request;
    Resp response;
    Finish finish;
    absl::AnyInvocable<void(HttpResponse) &&> done;
  };
  auto* s = new State{{}, std::move(request), {}, std::move(finish), std::move(done)};
  start(stub_->async(), &s->ctx, s->request.get(), &s->response, [s](grpc::Status status) {
    std::unique_ptr<State> owned(s);
    if (!status.ok()) {
      std::move(owned->done)(ErrorResponse(FromGrpc(status)));
    } else {
      std::move(owned->done)(owned->finish(owned->response));
    }
  });
}

void HttpService::Handle(HttpRequest request, absl::AnyInvocable<void(HttpResponse) &&> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
  }
  // Every answer goes through here: `done`, then the pending count.
  absl::AnyInvocable<void(HttpResponse)&&> reply =
      [this, done = std::move(done)](HttpResponse r) mutable {
        std::move(done)(std::move(r));
        Finished();
      };
  absl::string_view path = request.target;
  if (size_t q = path.find('?'); q != absl::string_view::npos) path = path.substr(0, q);
  absl::StatusOr<Route> route = Match(path);
  if (!route.ok()) return std::move(reply)(ErrorResponse(route.status()));
  if (request.method != route->method) {
    HttpResponse r = ErrorResponse(absl::InvalidArgumentError(
        absl::StrCat("method ", request.method.substr(0, 16), " is not allowed on ",
                     path.substr(0, 256), " (allowed: ", route->method, ")")));
    r.status = 405;
    r.headers.emplace_back("Allow", route->method);
    return std::move(reply)(std::move(r));
  }
  if (options_.access != nullptr) {
    if (const std::string* header = options_.access->RequiredHeader(route->group)) {
      bool match = false;
      for (const auto& [key, value] : request.headers) {
        if (key == *header) match |= options_.access->Matches(route->group, value);
      }
      if (!match) {
        HttpResponse r = ErrorResponse(absl::PermissionDeniedError(
            absl::StrCat("this API is restricted, expecting header \"", *header, "\"")));
        return std::move(reply)(std::move(r));
      }
    }
  }
  if (std::optional<absl::string_view> encoding = request.Header("content-encoding")) {
    absl::StatusOr<HttpEncoding> e = ParseContentEncoding(*encoding);
    if (!e.ok()) {
      HttpResponse r = ErrorResponse(e.status());
      r.status = 415;
      return std::move(reply)(std::move(r));
    }
    absl::StatusOr<std::string> body = Inflate(request.body, *e, options_.max_body_bytes);
    if (!body.ok()) {
      HttpResponse r = ErrorResponse(body.status());
      if (body.status().code() == absl::StatusCode::kResourceExhausted) r.status = 413;
      return std::move(reply)(std::move(r));
    }
    request.body = *std::move(body);
  }

  switch (route->kind) {
    case Kind::kLive:
      return Call<inference::ServerLiveRequest, inference::ServerLiveResponse>(
          std::make_unique<inference::ServerLiveRequest>(),
          [](auto* a, auto* c, auto* q, auto* p, auto cb) { a->ServerLive(c, q, p, cb); },
          [](const inference::ServerLiveResponse& r) { return Health(r.live()); },
          std::move(reply));
    case Kind::kReady:
      return Call<inference::ServerReadyRequest, inference::ServerReadyResponse>(
          std::make_unique<inference::ServerReadyRequest>(),
          [](auto* a, auto* c, auto* q, auto* p, auto cb) { a->ServerReady(c, q, p, cb); },
          [](const inference::ServerReadyResponse& r) { return Health(r.ready()); },
          std::move(reply));
    case Kind::kServerMetadata:
      return Call<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
          std::make_unique<inference::ServerMetadataRequest>(),
          [](auto* a, auto* c, auto* q, auto* p, auto cb) { a->ServerMetadata(c, q, p, cb); },
          [](const inference::ServerMetadataResponse& r) { return Json(ProtoToJson(r)); },
          std::move(reply));
    case Kind::kModelReady: {
      auto q = std::make_unique<inference::ModelReadyRequest>();
      q->set_name(route->model);
      q->set_version(route->version);
      return Call<inference::ModelReadyRequest, inference::ModelReadyResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->ModelReady(c, rq, p, cb); },
          [](const inference::ModelReadyResponse& r) { return Health(r.ready()); },
          std::move(reply));
    }
    case Kind::kModelMetadata: {
      auto q = std::make_unique<inference::ModelMetadataRequest>();
      q->set_name(route->model);
      q->set_version(route->version);
      return Call<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->ModelMetadata(c, rq, p, cb); },
          [](const inference::ModelMetadataResponse& r) { return Json(ProtoToJson(r)); },
          std::move(reply));
    }
    case Kind::kConfig: {
      auto q = std::make_unique<inference::ModelConfigRequest>();
      q->set_name(route->model);
      q->set_version(route->version);
      return Call<inference::ModelConfigRequest, inference::ModelConfigResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->ModelConfig(c, rq, p, cb); },
          [](const inference::ModelConfigResponse& r) { return Json(ProtoToJson(r.config())); },
          std::move(reply));
    }
    case Kind::kModelStats: {
      auto q = std::make_unique<inference::ModelStatisticsRequest>();
      q->set_name(route->model);
      q->set_version(route->version);
      return Call<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->ModelStatistics(c, rq, p, cb); },
          [](const inference::ModelStatisticsResponse& r) { return Json(ProtoToJson(r)); },
          std::move(reply));
    }
    case Kind::kRepositoryIndex: {
      rapidjson::Document doc;
      auto q = std::make_unique<inference::RepositoryIndexRequest>();
      if (absl::Status s = ParseBodyObject(request.body, "repository index", &doc); !s.ok()) {
        return std::move(reply)(ErrorResponse(s));
      }
      for (const auto& m : doc.GetObject()) {
        const absl::string_view key(m.name.GetString(), m.name.GetStringLength());
        if (key != "ready" || !m.value.IsBool()) {
          return std::move(reply)(ErrorResponse(absl::InvalidArgumentError(absl::StrCat(
              "repository index: unknown key \"", key, "\" (only \"ready\": true|false)"))));
        }
        q->set_ready(m.value.GetBool());
      }
      return Call<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->RepositoryIndex(c, rq, p, cb); },
          [](const inference::RepositoryIndexResponse& r) {
            std::vector<std::string> models;
            for (const auto& m : r.models()) models.push_back(ProtoToJson(m));
            return Json(absl::StrCat("[", absl::StrJoin(models, ","), "]"));
          },
          std::move(reply));
    }
    case Kind::kLoad:
    case Kind::kUnload: {
      rapidjson::Document doc;
      const char* what = route->kind == Kind::kLoad ? "load" : "unload";
      if (absl::Status s = ParseBodyObject(request.body, what, &doc); !s.ok()) {
        return std::move(reply)(ErrorResponse(s));
      }
      auto empty = [](const auto&) { return Json(""); };
      if (route->kind == Kind::kLoad) {
        auto q = std::make_unique<inference::RepositoryModelLoadRequest>();
        q->set_model_name(route->model);
        if (absl::Status s = ReadRepositoryParameters(doc, what, q->mutable_parameters());
            !s.ok()) {
          return std::move(reply)(ErrorResponse(s));
        }
        return Call<inference::RepositoryModelLoadRequest, inference::RepositoryModelLoadResponse>(
            std::move(q),
            [](auto* a, auto* c, auto* rq, auto* p, auto cb) {
              a->RepositoryModelLoad(c, rq, p, cb);
            },
            empty, std::move(reply));
      }
      auto q = std::make_unique<inference::RepositoryModelUnloadRequest>();
      q->set_model_name(route->model);
      if (absl::Status s = ReadRepositoryParameters(doc, what, q->mutable_parameters()); !s.ok()) {
        return std::move(reply)(ErrorResponse(s));
      }
      return Call<inference::RepositoryModelUnloadRequest,
                  inference::RepositoryModelUnloadResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) {
            a->RepositoryModelUnload(c, rq, p, cb);
          },
          empty, std::move(reply));
    }
    case Kind::kShmStatus: {
      auto q = std::make_unique<inference::SystemSharedMemoryStatusRequest>();
      q->set_name(route->region);
      return Call<inference::SystemSharedMemoryStatusRequest,
                  inference::SystemSharedMemoryStatusResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) {
            a->SystemSharedMemoryStatus(c, rq, p, cb);
          },
          [](const inference::SystemSharedMemoryStatusResponse& r) {
            std::vector<std::string> regions;
            for (const auto& [name, region] : r.regions()) regions.push_back(ProtoToJson(region));
            return Json(absl::StrCat("[", absl::StrJoin(regions, ","), "]"));
          },
          std::move(reply));
    }
    case Kind::kShmRegister: {
      rapidjson::Document doc;
      if (absl::Status s = ParseBodyObject(request.body, "shared memory register", &doc); !s.ok()) {
        return std::move(reply)(ErrorResponse(s));
      }
      auto q = std::make_unique<inference::SystemSharedMemoryRegisterRequest>();
      q->set_name(route->region);
      for (const auto& m : doc.GetObject()) {
        const absl::string_view key(m.name.GetString(), m.name.GetStringLength());
        if (key == "key" && m.value.IsString()) {
          q->set_key(m.value.GetString(), m.value.GetStringLength());
        } else if (key == "offset" && m.value.IsUint64()) {
          q->set_offset(m.value.GetUint64());
        } else if (key == "byte_size" && m.value.IsUint64()) {
          q->set_byte_size(m.value.GetUint64());
        } else {
          return std::move(reply)(ErrorResponse(absl::InvalidArgumentError(
              absl::StrCat("shared memory register: unknown key \"", key,
                           "\" or wrong type (key: string, offset and byte_size: integers)"))));
        }
      }
      return Call<inference::SystemSharedMemoryRegisterRequest,
                  inference::SystemSharedMemoryRegisterResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) {
            a->SystemSharedMemoryRegister(c, rq, p, cb);
          },
          [](const auto&) { return Json(""); }, std::move(reply));
    }
    case Kind::kShmUnregister: {
      auto q = std::make_unique<inference::SystemSharedMemoryUnregisterRequest>();
      q->set_name(route->region);
      return Call<inference::SystemSharedMemoryUnregisterRequest,
                  inference::SystemSharedMemoryUnregisterResponse>(
          std::move(q),
          [](auto* a, auto* c, auto* rq, auto* p, auto cb) {
            a->SystemSharedMemoryUnregister(c, rq, p, cb);
          },
          [](const auto&) { return Json(""); }, std::move(reply));
    }
    case Kind::kInfer:
      return Infer(std::move(request), *route, std::move(reply));
  }
}

void HttpService::Infer(HttpRequest request, const Route& route,
                        absl::AnyInvocable<void(HttpResponse) &&> done) {
  HttpCodecLimits limits;
  limits.max_tensor_bytes = options_.max_request_bytes;
  absl::StatusOr<HttpInferRequest> parsed =
      ParseHttpInferRequest(request.body, request.Header("inference-header-content-length"),
                            route.model, route.version, limits);
  if (!parsed.ok()) return std::move(done)(ErrorResponse(parsed.status()));
  const HttpEncoding encoding =
      ChooseResponseEncoding(request.Header("accept-encoding").value_or(""));
  auto owned = std::make_unique<HttpInferRequest>(*std::move(parsed));
  // The stub takes the request by pointer: keep the HttpInferRequest, hand it its proto.
  HttpInferRequest* http = owned.get();
  struct Holder {
    std::unique_ptr<HttpInferRequest> http;
  };
  auto holder = std::make_shared<Holder>(Holder{std::move(owned)});
  auto proto = std::make_unique<inference::ModelInferRequest>();
  proto->Swap(&http->request);
  auto* proto_raw = proto.get();
  Call<inference::ModelInferRequest, inference::ModelInferResponse>(
      std::move(proto),
      [](auto* a, auto* c, auto* rq, auto* p, auto cb) { a->ModelInfer(c, rq, p, cb); },
      [holder, proto_raw, encoding](const inference::ModelInferResponse& r) {
        // The response writer reads the requested outputs: give the proto back for it (the call
        // is over, nothing reads it any more).
        holder->http->request.Swap(proto_raw);
        absl::StatusOr<HttpBody> body = WriteHttpInferResponse(r, *holder->http);
        if (!body.ok()) return ErrorResponse(body.status());
        HttpResponse out;
        if (body->header_length.has_value()) {
          out.content_type = "application/octet-stream";
          out.headers.emplace_back("Inference-Header-Content-Length",
                                   std::to_string(*body->header_length));
        }
        out.body = std::move(body->body);
        if (encoding != HttpEncoding::kIdentity) {
          absl::StatusOr<std::string> compressed = Deflate(out.body, encoding);
          if (compressed.ok()) {
            out.body = *std::move(compressed);
            out.headers.emplace_back("Content-Encoding", std::string(EncodingName(encoding)));
          }
        }
        return out;
      },
      std::move(done));
}

namespace {

absl::StatusOr<HttpService::Route> Match(absl::string_view path) {
  auto not_found = [&] {
    return absl::NotFoundError(absl::StrCat("no route for ", path.substr(0, 256)));
  };
  std::vector<std::string> seg;
  for (absl::string_view s : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    std::optional<std::string> decoded = PercentDecode(s);
    if (!decoded.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed percent escape in ", path.substr(0, 256)));
    }
    seg.push_back(*std::move(decoded));
  }
  using R = HttpService::Route;
  if (seg.empty() || seg[0] != "v2") return not_found();
  const size_t n = seg.size();
  if (n == 1) return R{Kind::kServerMetadata, "GET", ProtocolGroup::kMetadata, "", "", ""};
  if (seg[1] == "health" && n == 3) {
    if (seg[2] == "live") return R{Kind::kLive, "GET", ProtocolGroup::kHealth, "", "", ""};
    if (seg[2] == "ready") return R{Kind::kReady, "GET", ProtocolGroup::kHealth, "", "", ""};
    return not_found();
  }
  if (seg[1] == "models") {
    if (n == 3 && seg[2] == "stats") {
      return R{Kind::kModelStats, "GET", ProtocolGroup::kStatistics, "", "", ""};
    }
    if (n < 3) return not_found();
    R r{Kind::kModelMetadata, "GET", ProtocolGroup::kMetadata, seg[2], "", ""};
    size_t i = 3;
    if (n >= 5 && seg[3] == "versions") {
      r.version = seg[4];
      i = 5;
    }
    if (i == n) return r;
    if (i + 1 != n) return not_found();
    const std::string& action = seg[i];
    if (action == "ready")
      return R{Kind::kModelReady, "GET", ProtocolGroup::kHealth, r.model, r.version, ""};
    if (action == "infer")
      return R{Kind::kInfer, "POST", ProtocolGroup::kInference, r.model, r.version, ""};
    if (action == "config")
      return R{Kind::kConfig, "GET", ProtocolGroup::kModelConfig, r.model, r.version, ""};
    if (action == "stats")
      return R{Kind::kModelStats, "GET", ProtocolGroup::kStatistics, r.model, r.version, ""};
    return not_found();
  }
  if (seg[1] == "repository") {
    if (n == 3 && seg[2] == "index") {
      return R{Kind::kRepositoryIndex, "POST", ProtocolGroup::kModelRepository, "", "", ""};
    }
    if (n == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      return R{seg[4] == "load" ? Kind::kLoad : Kind::kUnload,
               "POST",
               ProtocolGroup::kModelRepository,
               seg[3],
               "",
               ""};
    }
    return not_found();
  }
  if (seg[1] == "systemsharedmemory") {
    std::string region;
    size_t i = 2;
    if (n >= 4 && seg[2] == "region") {
      region = seg[3];
      i = 4;
    }
    if (i + 1 != n) return not_found();
    if (seg[i] == "status") {
      return R{Kind::kShmStatus, "GET", ProtocolGroup::kSharedMemory, "", "", region};
    }
    if (seg[i] == "register" && !region.empty()) {
      return R{Kind::kShmRegister, "POST", ProtocolGroup::kSharedMemory, "", "", region};
    }
    if (seg[i] == "unregister") {
      return R{Kind::kShmUnregister, "POST", ProtocolGroup::kSharedMemory, "", "", region};
    }
  }
  return not_found();
}

}  // namespace

}  // namespace reprise::server
