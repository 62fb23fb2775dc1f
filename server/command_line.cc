#include "server/command_line.h"

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/status_macros.h"

namespace reprise::server {
namespace {

struct Flag {
  std::string name;
  std::string value;
};

absl::StatusOr<std::vector<Flag>> SplitFlags(const std::vector<std::string>& args) {
  std::vector<Flag> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.push_back({"help", ""});
      continue;
    }
    if (!absl::ConsumePrefix(&arg, "--") || arg.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", args[i], "\""));
    }
    Flag f;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      f.name = std::string(arg.substr(0, eq));
      f.value = std::string(arg.substr(eq + 1));
    } else {
      f.name = std::string(arg);
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", f.name, " needs a value"));
      }
      f.value = args[++i];
    }
    flags.push_back(std::move(f));
  }
  return flags;
}

absl::Status ParseInt(const Flag& f, int64_t min, int64_t max, int* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(f.value, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", f.name, ": \"", f.value, "\" is not an integer in [", min, ", ", max, "]"));
  }
  *out = static_cast<int>(v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(std::vector<Flag> flags, SplitFlags(args));
  CommandLine out;
  for (const Flag& f : flags) {
    if (f.name == "help") out.help = true;
    if (f.name == "config") {
      ASSIGN_OR_RETURN(out.config, config::LoadServerConfigFile(f.value));
    }
  }
  config::ServerConfig& c = out.config;
  bool repos_from_flags = false;
  bool loads_from_flags = false;
  for (const Flag& f : flags) {
    if (f.name == "help" || f.name == "config") continue;
    if (f.name == "model-repository") {
      if (!repos_from_flags) c.model_repositories.clear();
      repos_from_flags = true;
      c.model_repositories.push_back(f.value);
    } else if (f.name == "load-model") {
      if (!loads_from_flags) c.load_models.clear();
      loads_from_flags = true;
      c.load_models.push_back(f.value);
    } else if (f.name == "grpc-address") {
      c.listen_address = f.value;
    } else if (f.name == "metrics-address") {
      c.metrics_address = f.value;
    } else if (f.name == "grpc-port") {
      RETURN_IF_ERROR(ParseInt(f, 0, 65535, &c.grpc_port));
    } else if (f.name == "http-address") {
      c.http_address = f.value;
    } else if (f.name == "http-port") {
      RETURN_IF_ERROR(ParseInt(f, 0, 65535, &c.http_port));
    } else if (f.name == "http-thread-count") {
      RETURN_IF_ERROR(ParseInt(f, 1, 256, &c.http_threads));
    } else if (f.name == "http-restricted-api") {
      ASSIGN_OR_RETURN(config::RestrictedProtocol p, config::ParseRestrictedProtocol(f.value));
      c.http_restricted_apis.push_back(std::move(p));
    } else if (f.name == "allow-http") {
      if (f.value != "true" && f.value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --allow-http: \"", f.value, "\" is not one of true, false"));
      }
      c.allow_http = f.value == "true";
    } else if (f.name == "metrics-port") {
      RETURN_IF_ERROR(ParseInt(f, 0, 65535, &c.metrics_port));
    } else if (f.name == "allow-metrics") {
      if (f.value != "true" && f.value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --allow-metrics: \"", f.value, "\" is not one of true, false"));
      }
      c.allow_metrics = f.value == "true";
    } else if (f.name == "strict-readiness") {
      if (f.value != "true" && f.value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --strict-readiness: \"", f.value, "\" is not one of true, false"));
      }
      c.strict_readiness = f.value == "true";
    } else if (f.name == "log-format") {
      if (f.value != "text" && f.value != "json") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --log-format: \"", f.value, "\" is not one of text, json"));
      }
      c.log_format = f.value;
    } else if (f.name == "exit-timeout-secs") {
      RETURN_IF_ERROR(ParseInt(f, 0, 86400, &c.shutdown_timeout_s));
    } else if (f.name == "model-control-mode") {
      if (f.value == "none") {
        c.control_mode = config::ControlMode::kNone;
      } else if (f.value == "explicit") {
        c.control_mode = config::ControlMode::kExplicit;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --model-control-mode: \"", f.value,
                                                       "\" is not one of none, explicit"));
      }
    } else if (f.name == "log-level") {
      bool known = false;
      for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
        known = known || f.value == level;
      }
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --log-level: \"", f.value,
                         "\" is not one of trace, debug, info, warn, error, "
                         "off"));
      }
      c.log_level = f.value;
    } else {
      ASSIGN_OR_RETURN(bool grpc_flag, config::ApplyGrpcFlag(f.name, f.value, &c.grpc));
      if (!grpc_flag) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", f.name));
    }
  }
  RETURN_IF_ERROR(config::ValidateGrpcConfig(c.grpc));
  return out;
}

std::string Usage() {
  return std::string(R"(usage: reprise-server [flags]
  --config FILE                 YAML config (config/README.md); defaults when absent
  --model-repository PATH       model repository; repeatable; replaces repository.paths
  --grpc-address ADDR           gRPC listen address (server.listen_address, default 0.0.0.0)
  --grpc-port N                 gRPC port (server.grpc_port, default 8001; 0 = any free port)
  --http-port N                 KServe v2 HTTP/REST port (server.http_port, default 8000;
                                0 = any free port)
  --http-address ADDR           HTTP listen address (server.http_address; default: the gRPC
                                address)
  --allow-http true|false       serve HTTP/REST at all (server.allow_http, default true)
  --http-restricted-api G[,G...]:HEADER=VALUE  HTTP requests of groups G need the header
                                (http.restricted_api; the groups of --grpc-restricted-protocol)
  --http-thread-count N         HTTP I/O threads (http.thread_count, default 2)
  --metrics-port N              Prometheus /metrics port (server.metrics_port, default 8002;
                                0 = any free port)
  --metrics-address ADDR        /metrics listen address (server.metrics_address; default: the
                                gRPC address)
  --allow-metrics true|false    serve /metrics at all (server.allow_metrics, default true)
  --strict-readiness true|false not ready while a startup model failed to load
                                (server.strict_readiness, default true)
  --model-control-mode MODE     none | explicit (repository.control_mode)
  --load-model NAME             explicit mode: load at start; repeatable; "*" = all
  --log-level LEVEL             trace | debug | info | warn | error | off
  --log-format FORMAT           text | json (one JSON object per line)
  --exit-timeout-secs N         in-flight requests' time to finish at shutdown (default 30)
)") + std::string(config::GrpcFlagsUsage());
}

}  // namespace reprise::server
