#include "tools/common/client_channel.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/client_interceptor.h"

namespace reprise::tools {
namespace {

absl::StatusOr<std::string> ReadPem(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(flag, ": cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Adds the configured headers to the initial metadata of every call.
class HeadersInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit HeadersInterceptor(const std::vector<std::pair<std::string, std::string>>* headers)
      : headers_(headers) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      for (const auto& [name, value] : *headers_) {
        methods->GetSendInitialMetadata()->emplace(name, value);
      }
    }
    methods->Proceed();
  }

 private:
  const std::vector<std::pair<std::string, std::string>>* const headers_;
};

class HeadersInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit HeadersInterceptorFactory(std::vector<std::pair<std::string, std::string>> headers)
      : headers_(std::move(headers)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new HeadersInterceptor(&headers_);
  }

 private:
  // Owned by the factory, which the channel keeps for its lifetime.
  const std::vector<std::pair<std::string, std::string>> headers_;
};

}  // namespace

absl::StatusOr<bool> ParseConnectionFlag(const std::vector<std::string>& args, size_t* i,
                                         ClientConnectionOptions* o) {
  std::string flag = args[*i];
  if (flag == "--ssl") {
    o->ssl = true;
    return true;
  }
  std::string value;
  bool inline_value = false;
  if (const size_t eq = flag.find('='); absl::StartsWith(flag, "--") && eq != std::string::npos) {
    value = flag.substr(eq + 1);
    flag = flag.substr(0, eq);
    inline_value = true;
  }
  std::string* file = nullptr;
  if (flag == "--root-certificates") {
    file = &o->root_certificates;
  } else if (flag == "--private-key") {
    file = &o->private_key;
  } else if (flag == "--certificate-chain") {
    file = &o->certificate_chain;
  } else if (flag != "-H") {
    return false;
  }
  if (!inline_value) {
    if (*i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " needs a value"));
    }
    value = args[++*i];
  }
  if (file != nullptr) {
    *file = value;
    o->ssl = true;
    return true;
  }
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("-H wants NAME=VALUE, got \"", value, "\""));
  }
  // gRPC metadata keys are lower case.
  o->headers.emplace_back(absl::AsciiStrToLower(value.substr(0, eq)), value.substr(eq + 1));
  return true;
}

absl::string_view ConnectionFlagsUsage() {
  return R"(connection:
  --ssl                        TLS (implied by the three files below)
  --root-certificates FILE     PEM CA certificates that sign the server's (default: system's)
  --private-key FILE           PEM client key, for mutual TLS (with --certificate-chain)
  --certificate-chain FILE     PEM client certificate chain, for mutual TLS
  -H NAME=VALUE                header sent with every call (repeatable), e.g. for a
                               restricted protocol group (--grpc-restricted-protocol)
)";
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeClientChannel(
    const std::string& addr, const ClientConnectionOptions& o, const grpc::ChannelArguments& args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (o.ssl) {
    if (o.private_key.empty() != o.certificate_chain.empty()) {
      return absl::InvalidArgumentError(
          "--private-key and --certificate-chain go together (mutual TLS)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!o.root_certificates.empty()) {
      absl::StatusOr<std::string> pem = ReadPem("--root-certificates", o.root_certificates);
      if (!pem.ok()) return pem.status();
      ssl.pem_root_certs = *std::move(pem);
    }
    if (!o.private_key.empty()) {
      absl::StatusOr<std::string> key = ReadPem("--private-key", o.private_key);
      if (!key.ok()) return key.status();
      absl::StatusOr<std::string> chain = ReadPem("--certificate-chain", o.certificate_chain);
      if (!chain.ok()) return chain.status();
      ssl.pem_private_key = *std::move(key);
      ssl.pem_cert_chain = *std::move(chain);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!o.headers.empty()) {
    interceptors.push_back(std::make_unique<HeadersInterceptorFactory>(o.headers));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(addr, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace reprise::tools
