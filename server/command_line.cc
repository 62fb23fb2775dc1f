#include "server/command_line.h"

#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/status_macros.h"

namespace reprise::server {
namespace {

struct Flag {
  std::string name;
  std::string value;
};

// Triton's flags that take no value (`--disable-auto-complete-config`); `=value` still works.
bool TakesNoValue(absl::string_view name) { return name == "disable-auto-complete-config"; }

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
    } else if (TakesNoValue(arg)) {
      f.name = std::string(arg);
      f.value = "true";
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

// Triton's boolean values (case-insensitive).
absl::StatusOr<bool> ParseTritonBool(const Flag& f) {
  const std::string v = absl::AsciiStrToLower(f.value);
  if (v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("flag --", f.name, ": \"", f.value, "\" is not true or false"));
}

// The log flags of Triton; spdlog has one threshold, so they become a level.
struct TritonLogFlags {
  bool given = false;
  int verbose = 0;
  bool info = true;
  bool warning = true;
  bool error = true;
};

absl::StatusOr<std::string> TritonLogLevel(const TritonLogFlags& t) {
  if ((t.info && !t.warning) || (t.warning && !t.error) || (t.info && !t.error)) {
    return absl::InvalidArgumentError(
        "flags --log-info / --log-warning / --log-error: Reprise logs every severity above the "
        "lowest one enabled, so a severity cannot be off while a lower one is on");
  }
  if (t.verbose > 0 && t.info) return std::string(t.verbose >= 2 ? "trace" : "debug");
  if (t.info) return std::string("info");
  if (t.warning) return std::string("warn");
  return std::string(t.error ? "error" : "off");
}

// --backend-config=[<backend>,]<key>=<value>: the keys Reprise uses.
absl::Status ApplyBackendConfig(const Flag& f, config::ServerConfig* c) {
  absl::string_view spec = f.value;
  absl::string_view backend;
  if (size_t comma = spec.find(','); comma != absl::string_view::npos) {
    backend = spec.substr(0, comma);
    spec = spec.substr(comma + 1);
  }
  if (!backend.empty() && backend != "onnxruntime") {
    return absl::InvalidArgumentError(absl::StrCat("flag --backend-config: backend \"", backend,
                                                   "\" is not served by Reprise (onnxruntime is)"));
  }
  const size_t eq = spec.find('=');
  const absl::string_view key = spec.substr(0, eq);
  if (eq == absl::string_view::npos || key != "default-max-batch-size") {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --backend-config: \"", f.value,
                     "\" is not supported (Reprise uses [onnxruntime,]default-max-batch-size=N)"));
  }
  return ParseInt(Flag{f.name, std::string(spec.substr(eq + 1))}, 0, 1 << 20,
                  &c->default_max_batch_size);
}

// Triton's flags that have no older Reprise spelling. False when `f` is none of them.
absl::StatusOr<bool> ApplyTritonFlag(const Flag& f, TritonLogFlags* log, config::ServerConfig* c) {
  if (f.name == "log-verbose") {
    log->given = true;
    RETURN_IF_ERROR(ParseInt(f, 0, 1 << 20, &log->verbose));
  } else if (f.name == "log-info" || f.name == "log-warning" || f.name == "log-error") {
    log->given = true;
    ASSIGN_OR_RETURN(bool on, ParseTritonBool(f));
    (f.name == "log-info" ? log->info : f.name == "log-warning" ? log->warning : log->error) = on;
  } else if (f.name == "log-file") {
    c->log_file = f.value;
  } else if (f.name == "repository-poll-secs") {
    RETURN_IF_ERROR(ParseInt(f, 1, 86400, &c->poll_seconds));
  } else if (f.name == "exit-on-error") {
    ASSIGN_OR_RETURN(c->exit_on_error, ParseTritonBool(f));
  } else if (f.name == "disable-auto-complete-config") {
    ASSIGN_OR_RETURN(bool off, ParseTritonBool(f));
    c->auto_complete_config = !off;
  } else if (f.name == "strict-model-config") {
    ASSIGN_OR_RETURN(bool strict, ParseTritonBool(f));
    c->auto_complete_config = !strict;
  } else if (f.name == "backend-config") {
    RETURN_IF_ERROR(ApplyBackendConfig(f, c));
  } else {
    return false;
  }
  return true;
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
  TritonLogFlags triton_log;
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
      ASSIGN_OR_RETURN(c.allow_http, ParseTritonBool(f));
    } else if (f.name == "metrics-port") {
      RETURN_IF_ERROR(ParseInt(f, 0, 65535, &c.metrics_port));
    } else if (f.name == "allow-metrics") {
      ASSIGN_OR_RETURN(c.allow_metrics, ParseTritonBool(f));
    } else if (f.name == "grpc-inflight-metric") {
      ASSIGN_OR_RETURN(c.grpc_inflight_metric, ParseTritonBool(f));
    } else if (f.name == "strict-readiness") {
      ASSIGN_OR_RETURN(c.strict_readiness, ParseTritonBool(f));
    } else if (f.name == "log-format") {
      if (f.value != "text" && f.value != "json" && f.value != "default" && f.value != "ISO8601") {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --log-format: \"", f.value, "\" is not one of text, json, default, ISO8601"));
      }
      c.log_format = f.value;
    } else if (f.name == "exit-timeout-secs") {
      RETURN_IF_ERROR(ParseInt(f, 0, 86400, &c.shutdown_timeout_s));
    } else if (f.name == "model-control-mode") {
      if (f.value == "none") {
        c.control_mode = config::ControlMode::kNone;
      } else if (f.value == "explicit") {
        c.control_mode = config::ControlMode::kExplicit;
      } else if (f.value == "poll") {
        c.control_mode = config::ControlMode::kPoll;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --model-control-mode: \"", f.value,
                                                       "\" is not one of none, explicit, poll"));
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
      ASSIGN_OR_RETURN(bool triton_flag, ApplyTritonFlag(f, &triton_log, &c));
      if (triton_flag) continue;
      ASSIGN_OR_RETURN(bool grpc_flag, config::ApplyGrpcFlag(f.name, f.value, &c.grpc));
      if (!grpc_flag) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", f.name));
    }
  }
  if (triton_log.given) {
    ASSIGN_OR_RETURN(c.log_level, TritonLogLevel(triton_log));
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
  --grpc-inflight-metric true|false  export reprise_grpc_server_inflight_calls (a gRPC
                                interceptor; server.grpc_inflight_metric, default false)
  --strict-readiness true|false not ready while a startup model failed to load
                                (server.strict_readiness, default true)
  --model-control-mode MODE     none | explicit | poll (repository.control_mode)
  --repository-poll-secs N      poll mode: seconds between scans (repository.poll_seconds, 15)
  --load-model NAME             explicit mode: load at start; repeatable; "*" = all
  --disable-auto-complete-config  use model configs as written (no auto-complete from the
                                graph); --strict-model-config=true means the same
  --backend-config=onnxruntime,default-max-batch-size=N
                                max_batch_size that auto-complete gives a model that can batch
                                (repository.default_max_batch_size, 4; 0: no batching)
  --exit-on-error true|false    exit 1 when a startup model fails to load (default false)
  --log-level LEVEL             trace | debug | info | warn | error | off
  --log-verbose N               Triton's verbose level: 1 = debug, 2 or more = trace
  --log-info, --log-warning, --log-error true|false
                                Triton's severities, as a threshold (the lowest one enabled)
  --log-format FORMAT           text | json (one JSON object per line) | default | ISO8601
                                (Triton's line formats)
  --log-file PATH               append the log to PATH instead of standard output
  --exit-timeout-secs N         in-flight requests' time to finish at shutdown (default 30)
)") + std::string(config::GrpcFlagsUsage());
}

}  // namespace reprise::server
