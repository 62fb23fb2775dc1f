#include "config/grpc_config.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "config/yaml_reader.h"
#include "runtime/base/status_macros.h"

namespace reprise::config {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

bool IsGroup(absl::string_view name) {
  return std::find(std::begin(kProtocolGroups), std::end(kProtocolGroups), name) !=
         std::end(kProtocolGroups);
}

// The integer keys: flag name (and YAML key with underscores), range, field.
struct IntKey {
  absl::string_view flag;
  int64_t min;
  int64_t max;
  int64_t GrpcConfig::*wide;
  int GrpcConfig::*narrow;
};

constexpr IntKey kIntKeys[] = {
    {"cert-refresh-seconds", 1, 86400, nullptr, &GrpcConfig::cert_refresh_seconds},
    {"max-concurrent-streams", 1, kMaxInt32, nullptr, &GrpcConfig::max_concurrent_streams},
    {"memory-quota-bytes", 0, kMaxInt64, &GrpcConfig::memory_quota_bytes, nullptr},
    {"max-threads", 0, 1 << 20, nullptr, &GrpcConfig::max_threads},
    {"max-receive-message-bytes", 0, kMaxInt32, &GrpcConfig::max_receive_message_bytes, nullptr},
    {"keepalive-time", 1, kMaxInt32, &GrpcConfig::keepalive_time, nullptr},
    {"keepalive-timeout", 1, kMaxInt32, &GrpcConfig::keepalive_timeout, nullptr},
    {"http2-max-pings-without-data", 0, kMaxInt32, nullptr,
     &GrpcConfig::http2_max_pings_without_data},
    {"http2-min-recv-ping-interval-without-data", 0, kMaxInt32,
     &GrpcConfig::http2_min_recv_ping_interval_without_data, nullptr},
    {"http2-max-ping-strikes", 0, kMaxInt32, nullptr, &GrpcConfig::http2_max_ping_strikes},
};

struct BoolKey {
  absl::string_view flag;
  bool GrpcConfig::*field;
};

constexpr BoolKey kBoolKeys[] = {
    {"use-ssl", &GrpcConfig::use_ssl},
    {"use-ssl-mutual", &GrpcConfig::use_ssl_mutual},
    {"keepalive-permit-without-calls", &GrpcConfig::keepalive_permit_without_calls},
    {"admin-service", &GrpcConfig::admin_service},
    {"model-repository-service", &GrpcConfig::model_repository_service},
    {"allow-address-dump", &GrpcConfig::allow_address_dump},
    {"allow-value-dump", &GrpcConfig::allow_value_dump},
};

struct StringKey {
  absl::string_view flag;
  std::string GrpcConfig::*field;
};

constexpr StringKey kStringKeys[] = {
    {"server-cert", &GrpcConfig::server_cert},
    {"server-key", &GrpcConfig::server_key},
    {"root-cert", &GrpcConfig::root_cert},
};

constexpr absl::string_view kCompressionLevels[] = {"none", "low", "medium", "high"};

// Flags spelled without the --grpc- prefix (not gRPC options in Triton either).
bool Unprefixed(absl::string_view flag) {
  return flag == "admin-service" || flag == "model-repository-service" ||
         flag == "allow-address-dump" || flag == "allow-value-dump";
}

std::string YamlKey(absl::string_view flag) {
  std::string key(flag);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

void IntSet(GrpcConfig* c, const IntKey& k, int64_t v) {
  if (k.wide != nullptr) {
    c->*k.wide = v;
  } else {
    c->*k.narrow = static_cast<int>(v);
  }
}

}  // namespace

absl::StatusOr<RestrictedProtocol> ParseRestrictedProtocol(absl::string_view spec) {
  const size_t colon = spec.find(':');
  const size_t eq = colon == absl::string_view::npos ? colon : spec.find('=', colon);
  if (colon == absl::string_view::npos || eq == absl::string_view::npos || colon == 0 ||
      eq == colon + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("restricted protocol \"", spec, "\" is not <groups>:<header>=<value>"));
  }
  RestrictedProtocol out;
  for (absl::string_view g : absl::StrSplit(spec.substr(0, colon), ',')) {
    g = absl::StripAsciiWhitespace(g);
    if (!IsGroup(g)) {
      return absl::InvalidArgumentError(
          absl::StrCat("restricted protocol \"", spec, "\": unknown group \"", g,
                       "\" (groups: ", absl::StrJoin(kProtocolGroups, ", "), ")"));
    }
    out.groups.emplace_back(g);
  }
  out.header = absl::AsciiStrToLower(spec.substr(colon + 1, eq - colon - 1));
  out.value = std::string(spec.substr(eq + 1));
  if (out.value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restricted protocol \"", spec, "\": the header value is empty"));
  }
  return out;
}

absl::Status ParseGrpcSection(const YamlReader& r, const YAML::Node& node, GrpcConfig* c) {
  std::vector<std::string> keys;
  for (const IntKey& k : kIntKeys) keys.push_back(YamlKey(k.flag));
  for (const BoolKey& k : kBoolKeys) keys.push_back(YamlKey(k.flag));
  for (const StringKey& k : kStringKeys) keys.push_back(YamlKey(k.flag));
  keys.emplace_back("restricted_protocol");
  keys.emplace_back("infer_response_compression_level");
  // CheckMap takes a fixed list; the keys come from the tables here.
  if (node.IsDefined() && !node.IsNull()) {
    if (!node.IsMap()) return r.Error(node, "grpc", "is not a mapping");
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(r.source(), " line ", entry.first.Mark().line + 1, ": unknown key \"",
                         YamlReader::Join("grpc", key),
                         "\" (expected one of: ", absl::StrJoin(keys, ", "), ")"));
      }
    }
  }
  for (const IntKey& k : kIntKeys) {
    int64_t v = k.wide != nullptr ? c->*k.wide : c->*k.narrow;
    RETURN_IF_ERROR(r.ReadInt(node, "grpc", YamlKey(k.flag), k.min, k.max, &v));
    IntSet(c, k, v);
  }
  for (const BoolKey& k : kBoolKeys) {
    RETURN_IF_ERROR(r.ReadBool(node, "grpc", YamlKey(k.flag), &(c->*k.field)));
  }
  for (const StringKey& k : kStringKeys) {
    RETURN_IF_ERROR(r.ReadString(node, "grpc", YamlKey(k.flag), &(c->*k.field)));
  }
  RETURN_IF_ERROR(r.ReadEnum(node, "grpc", "infer_response_compression_level",
                             {"none", "low", "medium", "high"},
                             &c->infer_response_compression_level));
  std::vector<std::string> specs;
  RETURN_IF_ERROR(r.ReadStringList(node, "grpc", "restricted_protocol", &specs));
  for (const std::string& spec : specs) {
    absl::StatusOr<RestrictedProtocol> p = ParseRestrictedProtocol(spec);
    if (!p.ok()) {
      return r.Error(YamlReader::Child(node, "restricted_protocol"), "grpc.restricted_protocol",
                     p.status().message());
    }
    c->restricted_protocols.push_back(*std::move(p));
  }
  return absl::OkStatus();
}

absl::Status ValidateGrpcConfig(const GrpcConfig& c) {
  const bool tls = c.use_ssl || c.use_ssl_mutual;
  if (tls && (c.server_cert.empty() || c.server_key.empty())) {
    return absl::InvalidArgumentError(
        "TLS (grpc-use-ssl) needs grpc-server-cert and grpc-server-key");
  }
  if (c.use_ssl_mutual && c.root_cert.empty()) {
    return absl::InvalidArgumentError(
        "mutual TLS (grpc-use-ssl-mutual) needs grpc-root-cert, the CA of the client certificates");
  }
  return absl::OkStatus();
}

int64_t EffectiveMaxReceiveMessageBytes(const GrpcConfig& c, int64_t max_message_bytes) {
  if (c.max_receive_message_bytes > 0)
    return std::min(c.max_receive_message_bytes, max_message_bytes);
  return max_message_bytes;
}

absl::StatusOr<bool> ApplyGrpcFlag(absl::string_view name, absl::string_view value, GrpcConfig* c) {
  absl::string_view key = name;
  const bool prefixed = absl::ConsumePrefix(&key, "grpc-");
  if (prefixed == Unprefixed(key)) return false;
  if (key == "restricted-protocol") {
    ASSIGN_OR_RETURN(RestrictedProtocol p, ParseRestrictedProtocol(value));
    c->restricted_protocols.push_back(std::move(p));
    return true;
  }
  if (key == "infer-response-compression-level") {
    if (std::find(std::begin(kCompressionLevels), std::end(kCompressionLevels), value) ==
        std::end(kCompressionLevels)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, ": \"", value, "\" is not one of none, low, medium, high"));
    }
    c->infer_response_compression_level = std::string(value);
    return true;
  }
  for (const StringKey& k : kStringKeys) {
    if (k.flag == key) {
      c->*k.field = std::string(value);
      return true;
    }
  }
  for (const BoolKey& k : kBoolKeys) {
    if (k.flag != key) continue;
    if (value == "true" || value == "on") {
      c->*k.field = true;
    } else if (value == "false" || value == "off") {
      c->*k.field = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, ": \"", value, "\" is not one of true, false"));
    }
    return true;
  }
  for (const IntKey& k : kIntKeys) {
    if (k.flag != key) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < k.min || v > k.max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --", name, ": \"", value, "\" is not an integer in [", k.min, ", ", k.max, "]"));
    }
    IntSet(c, k, v);
    return true;
  }
  return false;
}

absl::string_view GrpcFlagsUsage() {
  return R"(gRPC transport (YAML: the grpc: section, --grpc-x-y is key x_y; config/README.md):
  --grpc-use-ssl true|false     TLS on the gRPC port (needs --grpc-server-cert/-key)
  --grpc-use-ssl-mutual true|false  mutual TLS: clients need a cert of --grpc-root-cert
  --grpc-server-cert FILE       server certificate chain (PEM)
  --grpc-server-key FILE        server private key (PEM)
  --grpc-root-cert FILE         CA certificate(s) that sign client certificates (PEM)
  --grpc-cert-refresh-seconds N certificate files are re-read this often (default 60)
  --grpc-restricted-protocol G[,G...]:HEADER=VALUE  calls of groups G need the header
                                (health, metadata, inference, shared-memory, model-config,
                                model-repository, statistics, trace, logging, admin)
  --admin-service true|false    serve reprise.v1.RuntimeInstances (default true)
  --model-repository-service true|false  serve RepositoryIndex/Load/Unload (default true)
  --allow-address-dump true|false  verbose instance dumps keep host addresses (default false)
  --allow-value-dump true|false    listings show value-keyed inputs' values (default false)
  --grpc-max-concurrent-streams N  HTTP/2 streams per connection (default 100)
  --grpc-memory-quota-bytes N   gRPC's memory quota (default 0: a quarter of the RAM)
  --grpc-max-threads N          gRPC's thread quota (default 0: 4 per core, at least 16)
  --grpc-max-receive-message-bytes N  (default 0: limits.max_message_bytes)
  --grpc-keepalive-time MS, --grpc-keepalive-timeout MS, --grpc-keepalive-permit-without-calls
  --grpc-http2-max-pings-without-data N, --grpc-http2-min-recv-ping-interval-without-data MS,
  --grpc-http2-max-ping-strikes N     keepalive enforcement (Triton's names and defaults)
  --grpc-infer-response-compression-level none|low|medium|high  (default none)
)";
}

}  // namespace reprise::config
