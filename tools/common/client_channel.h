// The gRPC channel of Reprise's client tools (reprise, reprise-bench, infer_latency): plaintext
// or TLS (with a client certificate for mutual TLS) and extra request headers, from the same
// flags in every tool (perf_analyzer's -H; --ssl and the PEM files).
#ifndef REPRISE_TOOLS_COMMON_CLIENT_CHANNEL_H_
#define REPRISE_TOOLS_COMMON_CLIENT_CHANNEL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace reprise::tools {

struct ClientConnectionOptions {
  bool ssl = false;               // TLS; implied by any of the three files
  std::string root_certificates;  // PEM CA file; empty: the system's roots
  std::string private_key;        // PEM client key (mutual TLS), with certificate_chain
  std::string certificate_chain;  // PEM client certificate chain (mutual TLS)
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every call
};

/// If `args[*i]` is a connection flag (--ssl, --root-certificates FILE, --private-key FILE,
/// --certificate-chain FILE, -H NAME=VALUE; "--flag=value" too), applies it, moves `*i` past
/// its value and returns true; false when it is another flag. INVALID_ARGUMENT for a missing
/// or malformed value.
absl::StatusOr<bool> ParseConnectionFlag(const std::vector<std::string>& args, size_t* i,
                                         ClientConnectionOptions* options);

/// The connection flags' lines of a tool's usage text.
absl::string_view ConnectionFlagsUsage();

/// A channel to `addr` with `options`' credentials and headers (a client interceptor adds the
/// headers to every call). The PEM files are read here; NOT_FOUND names an unreadable one.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeClientChannel(
    const std::string& addr, const ClientConnectionOptions& options,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace reprise::tools

#endif  // REPRISE_TOOLS_COMMON_CLIENT_CHANNEL_H_
