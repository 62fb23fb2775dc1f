// reprise-server's command line: Triton's flag names, overriding the config file.
#ifndef REPRISE_SERVER_COMMAND_LINE_H_
#define REPRISE_SERVER_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/server_config.h"

namespace reprise::server {

/// The result of parsing the command line.
struct CommandLine {
  config::ServerConfig config;
  bool help = false;  // --help: print Usage() and exit
};

/// Parses `args` (without the program name). `--config FILE` is read first (defaults when
/// absent); then --model-repository (repeatable), --grpc-address, --grpc-port, --metrics-port,
/// --model-control-mode (none|explicit|poll), --repository-poll-secs, --load-model
/// (repeatable), --log-level, --log-format (text|json|default|ISO8601), --log-file, Triton's
/// --log-verbose / --log-info / --log-warning / --log-error (folded into the level),
/// --exit-on-error, --disable-auto-complete-config (no value needed), --strict-model-config,
/// --backend-config=[onnxruntime,]default-max-batch-size=N, --allow-metrics (true|false),
/// --exit-timeout-secs override it (config/README.md).
/// `--flag=value` and `--flag value` both work. An unknown flag, a missing or bad value is
/// INVALID_ARGUMENT naming the flag.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

/// The help text.
std::string Usage();

}  // namespace reprise::server

#endif  // REPRISE_SERVER_COMMAND_LINE_H_
