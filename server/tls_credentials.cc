#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/server_config.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "runtime/base/status_macros.h"

namespace reprise::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Cert = std::unique_ptr<X509, X509Free>;

std::string OpenSslError() {
  const auto code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::Status FileError(absl::string_view what, const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(what, " \"", path, "\": ", why));
}

// Every certificate in the PEM file `path`; at least one.
absl::StatusOr<std::vector<Cert>> ReadCerts(absl::string_view what, const std::string& path,
                                            const std::string& text) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  std::vector<Cert> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the end of the file reads as an error
  if (certs.empty()) return FileError(what, path, "holds no PEM certificate");
  for (size_t i = 0; i < certs.size(); ++i) {
    const std::string which = certs.size() > 1 ? absl::StrCat(" (certificate ", i + 1, ")") : "";
    if (X509_cmp_current_time(X509_get0_notAfter(certs[i].get())) <= 0) {
      return FileError(what, path, absl::StrCat("the certificate", which, " has expired"));
    }
    if (X509_cmp_current_time(X509_get0_notBefore(certs[i].get())) >= 0) {
      return FileError(what, path, absl::StrCat("the certificate", which, " is not valid yet"));
    }
  }
  return certs;
}

absl::StatusOr<std::string> ReadFile(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> text = config::ReadTextFile(path);
  if (!text.ok()) return FileError(what, path, text.status().message());
  return text;
}

}  // namespace

absl::Status CheckTlsFiles(const config::GrpcConfig& c) {
  if (!c.use_ssl && !c.use_ssl_mutual) return absl::OkStatus();
  RETURN_IF_ERROR(config::ValidateGrpcConfig(c));
  ASSIGN_OR_RETURN(std::string cert_pem, ReadFile("server certificate", c.server_cert));
  ASSIGN_OR_RETURN(std::vector<Cert> chain,
                   ReadCerts("server certificate", c.server_cert, cert_pem));
  ASSIGN_OR_RETURN(std::string key_pem, ReadFile("server key", c.server_key));
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return FileError("server key", c.server_key,
                     absl::StrCat("is not a PEM private key (", OpenSslError(), ")"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return FileError("server key", c.server_key,
                     absl::StrCat("does not match the certificate \"", c.server_cert, "\""));
  }
  if (!c.root_cert.empty()) {
    ASSIGN_OR_RETURN(std::string root_pem, ReadFile("root certificate", c.root_cert));
    RETURN_IF_ERROR(ReadCerts("root certificate", c.root_cert, root_pem).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const config::GrpcConfig& c) {
  if (!c.use_ssl && !c.use_ssl_mutual) return grpc::InsecureServerCredentials();
  RETURN_IF_ERROR(CheckTlsFiles(c));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      c.server_key, c.server_cert, c.root_cert, static_cast<unsigned int>(c.cert_refresh_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!c.root_cert.empty()) options.watch_root_certs();
  options.set_cert_request_type(c.use_ssl_mutual
                                    ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                    : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(options);
  if (credentials == nullptr) {
    return absl::InternalError(
        absl::StrCat("gRPC refused the TLS credentials of \"", c.server_cert, "\""));
  }
  return credentials;
}

}  // namespace reprise::server
