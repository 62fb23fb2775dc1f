// The gRPC server's transport credentials: plaintext, TLS or mutual TLS from PEM files, checked
// with OpenSSL before gRPC sees them (see config::GrpcConfig).
#ifndef REPRISE_SERVER_TLS_CREDENTIALS_H_
#define REPRISE_SERVER_TLS_CREDENTIALS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/grpc_config.h"
#include "grpcpp/security/server_credentials.h"

namespace reprise::server {

/// Reads and checks the TLS files of `config` (nothing when TLS is off): each must be readable
/// PEM, the key must match the server certificate, and no certificate may be expired or not
/// yet valid. The error is FAILED_PRECONDITION naming the file. Thread-safe.
absl::Status CheckTlsFiles(const config::GrpcConfig& config);

/// Insecure credentials when TLS is off; otherwise checks the files (CheckTlsFiles) and returns
/// TLS credentials whose certificate provider re-reads the files every
/// `cert_refresh_seconds` (gRPC's FileWatcherCertificateProvider): replaced files take effect
/// for new connections without a restart and without dropping open ones. In mutual mode the
/// client must present a certificate signed by `root_cert`
/// (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const config::GrpcConfig& config);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_TLS_CREDENTIALS_H_
