// The gRPC transport's settings: TLS, access control per protocol group, resource limits and
// keepalive (the `grpc:` section of the server YAML; config/README.md). Key names follow
// Triton's flags: `--grpc-use-ssl` is `grpc: {use_ssl: ...}` (dashes become underscores).
#ifndef REPRISE_CONFIG_GRPC_CONFIG_H_
#define REPRISE_CONFIG_GRPC_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace reprise::config {

class YamlReader;

/// The protocol groups of Triton's --grpc-restricted-protocol, plus "admin"
/// (reprise.v1.RuntimeInstances).
inline constexpr absl::string_view kProtocolGroups[] = {
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging",       "admin"};

/// One --grpc-restricted-protocol: calls in `groups` need the request header `header` (lower
/// case, as gRPC metadata keys are) with exactly `value`.
struct RestrictedProtocol {
  std::vector<std::string> groups;
  std::string header;
  std::string value;
};

/// Parses "<group>[,<group>...]:<header>=<value>"; INVALID_ARGUMENT naming the spec and the
/// unknown group or the missing part.
absl::StatusOr<RestrictedProtocol> ParseRestrictedProtocol(absl::string_view spec);

struct GrpcConfig {
  // TLS (certificates are PEM files, read at start and re-read every cert_refresh_seconds).
  bool use_ssl = false;
  bool use_ssl_mutual = false;  // implies use_ssl; clients must present a cert of root_cert
  std::string server_cert;
  std::string server_key;
  std::string root_cert;
  int cert_refresh_seconds = 60;
  // Access control.
  std::vector<RestrictedProtocol> restricted_protocols;
  bool admin_service = true;             // false: reprise.v1.RuntimeInstances not served
  bool model_repository_service = true;  // false: RepositoryIndex / Load / Unload UNIMPLEMENTED
  bool allow_address_dump = false;       // verbose instance dumps keep host addresses
  bool allow_value_dump = false;         // instance listings show value-keyed input values
  // Resource limits.
  int max_concurrent_streams = 100;       // per connection (HTTP/2 SETTINGS)
  int64_t memory_quota_bytes = 0;         // 0: a quarter of the machine's memory
  int max_threads = 0;                    // gRPC's thread quota; 0: 4 per core, at least 16
  int64_t max_receive_message_bytes = 0;  // 0: limits.max_message_bytes (at most that)
  // Keepalive, in milliseconds (Triton's names and defaults).
  int64_t keepalive_time = 7200000;
  int64_t keepalive_timeout = 20000;
  bool keepalive_permit_without_calls = false;
  int http2_max_pings_without_data = 2;
  int64_t http2_min_recv_ping_interval_without_data = 300000;
  int http2_max_ping_strikes = 2;
  std::string infer_response_compression_level = "none";  // none, low, medium, high
};

/// Reads the `grpc:` mapping `node` (absent: defaults stand) into `*config`. For
/// server_config.cc.
absl::Status ParseGrpcSection(const YamlReader& reader, const YAML::Node& node, GrpcConfig* config);

/// Cross-field checks: mutual TLS needs root_cert, TLS needs server_cert and server_key.
absl::Status ValidateGrpcConfig(const GrpcConfig& config);

/// The effective receive limit (see max_receive_message_bytes) for a `max_message_bytes`.
int64_t EffectiveMaxReceiveMessageBytes(const GrpcConfig& config, int64_t max_message_bytes);

/// Applies one `--name=value` flag if it is a gRPC flag (name without the dashes). Returns
/// false for a flag that is not one; INVALID_ARGUMENT naming the flag for a bad value.
absl::StatusOr<bool> ApplyGrpcFlag(absl::string_view name, absl::string_view value,
                                   GrpcConfig* config);

/// The gRPC flags' lines of the daemon's usage text.
absl::string_view GrpcFlagsUsage();

}  // namespace reprise::config

#endif  // REPRISE_CONFIG_GRPC_CONFIG_H_
