#include "config/server_config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "config/yaml_reader.h"
#include "runtime/base/status_macros.h"

namespace reprise::config {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

// Reads an int-typed field through the int64 reader.
absl::Status ReadInt32(const YamlReader& r, const YAML::Node& map, absl::string_view path,
                       absl::string_view key, int64_t min, int64_t max, int* out) {
  int64_t value = *out;
  RETURN_IF_ERROR(r.ReadInt(map, path, key, min, max, &value));
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status ParseInto(const YamlReader& r, const YAML::Node& root, ServerConfig* c) {
  RETURN_IF_ERROR(r.CheckMap(root, "",
                             {"server", "repository", "runtime", "kernels", "limits", "batching",
                              "capture", "shutdown", "log", "grpc", "http"}));

  const YAML::Node server = YamlReader::Child(root, "server");
  RETURN_IF_ERROR(r.CheckMap(
      server, "server",
      {"listen_address", "grpc_port", "metrics_port", "allow_metrics", "metrics_address",
       "grpc_inflight_metric", "strict_readiness", "allow_http", "http_port", "http_address"}));
  RETURN_IF_ERROR(r.ReadBool(server, "server", "allow_http", &c->allow_http));
  RETURN_IF_ERROR(ReadInt32(r, server, "server", "http_port", 0, 65535, &c->http_port));
  RETURN_IF_ERROR(r.ReadString(server, "server", "http_address", &c->http_address));
  RETURN_IF_ERROR(r.ReadString(server, "server", "metrics_address", &c->metrics_address));
  RETURN_IF_ERROR(r.ReadString(server, "server", "listen_address", &c->listen_address));
  RETURN_IF_ERROR(ReadInt32(r, server, "server", "grpc_port", 0, 65535, &c->grpc_port));
  RETURN_IF_ERROR(ReadInt32(r, server, "server", "metrics_port", 0, 65535, &c->metrics_port));
  RETURN_IF_ERROR(r.ReadBool(server, "server", "allow_metrics", &c->allow_metrics));
  RETURN_IF_ERROR(r.ReadBool(server, "server", "grpc_inflight_metric", &c->grpc_inflight_metric));
  RETURN_IF_ERROR(r.ReadBool(server, "server", "strict_readiness", &c->strict_readiness));

  const YAML::Node repo = YamlReader::Child(root, "repository");
  RETURN_IF_ERROR(r.CheckMap(
      repo, "repository",
      {"paths", "control_mode", "load_models", "load_threads", "poll_seconds",
       "auto_complete_config", "default_max_batch_size", "exit_on_error", "upload_dir"}));
  RETURN_IF_ERROR(r.ReadString(repo, "repository", "upload_dir", &c->upload_dir));
  RETURN_IF_ERROR(r.ReadStringList(repo, "repository", "paths", &c->model_repositories));
  std::string mode(ControlModeName(c->control_mode));
  RETURN_IF_ERROR(
      r.ReadEnum(repo, "repository", "control_mode", {"none", "explicit", "poll"}, &mode));
  c->control_mode = mode == "explicit" ? ControlMode::kExplicit
                    : mode == "poll"   ? ControlMode::kPoll
                                       : ControlMode::kNone;
  RETURN_IF_ERROR(r.ReadStringList(repo, "repository", "load_models", &c->load_models));
  RETURN_IF_ERROR(ReadInt32(r, repo, "repository", "load_threads", 1, 256, &c->load_threads));
  RETURN_IF_ERROR(ReadInt32(r, repo, "repository", "poll_seconds", 1, 86400, &c->poll_seconds));
  RETURN_IF_ERROR(r.ReadBool(repo, "repository", "auto_complete_config", &c->auto_complete_config));
  RETURN_IF_ERROR(ReadInt32(r, repo, "repository", "default_max_batch_size", 0, 1 << 20,
                            &c->default_max_batch_size));
  RETURN_IF_ERROR(r.ReadBool(repo, "repository", "exit_on_error", &c->exit_on_error));

  const YAML::Node runtime = YamlReader::Child(root, "runtime");
  RETURN_IF_ERROR(
      r.CheckMap(runtime, "runtime",
                 {"streams_per_device", "cpu_threads", "intra_op_threads", "choose_threads"}));
  RETURN_IF_ERROR(
      ReadInt32(r, runtime, "runtime", "streams_per_device", 1, 1024, &c->streams_per_device));
  RETURN_IF_ERROR(ReadInt32(r, runtime, "runtime", "cpu_threads", 0, 4096, &c->cpu_threads));
  RETURN_IF_ERROR(
      ReadInt32(r, runtime, "runtime", "intra_op_threads", 0, 4096, &c->intra_op_threads));
  RETURN_IF_ERROR(r.ReadBool(runtime, "runtime", "choose_threads", &c->choose_threads));

  const YAML::Node kernels = YamlReader::Child(root, "kernels");
  RETURN_IF_ERROR(r.CheckMap(kernels, "kernels",
                             {"conv_winograd", "conv_taps_as_channels", "conv_tap_regions",
                              "conv_own_depthwise", "conv_chain_layout", "clear_outputs"}));
  RETURN_IF_ERROR(r.ReadBool(kernels, "kernels", "conv_winograd", &c->kernels_conv_winograd));
  RETURN_IF_ERROR(
      r.ReadBool(kernels, "kernels", "conv_taps_as_channels", &c->kernels_conv_taps_as_channels));
  RETURN_IF_ERROR(r.ReadBool(kernels, "kernels", "conv_tap_regions", &c->kernels_conv_tap_regions));
  RETURN_IF_ERROR(
      r.ReadBool(kernels, "kernels", "conv_own_depthwise", &c->kernels_conv_own_depthwise));
  RETURN_IF_ERROR(r.ReadEnum(kernels, "kernels", "conv_chain_layout", {"auto", "nhwc"},
                             &c->kernels_conv_chain_layout));
  RETURN_IF_ERROR(r.ReadEnum(kernels, "kernels", "clear_outputs", {"auto", "on", "off"},
                             &c->kernels_clear_outputs));

  const YAML::Node batching = YamlReader::Child(root, "batching");
  RETURN_IF_ERROR(r.CheckMap(batching, "batching",
                             {"max_queue_delay_microseconds", "default_timeout_microseconds"}));
  RETURN_IF_ERROR(r.ReadInt(batching, "batching", "max_queue_delay_microseconds", 0,
                            std::numeric_limits<int64_t>::max() / 1000,
                            &c->batching_max_queue_delay_us));
  RETURN_IF_ERROR(r.ReadInt(batching, "batching", "default_timeout_microseconds", 0,
                            std::numeric_limits<int64_t>::max() / 1000,
                            &c->batching_default_timeout_us));

  const YAML::Node capture = YamlReader::Child(root, "capture");
  RETURN_IF_ERROR(r.CheckMap(capture, "capture",
                             {"memory_budget_bytes", "max_instances_per_stream", "warmup"}));
  RETURN_IF_ERROR(r.ReadInt(capture, "capture", "memory_budget_bytes", 0,
                            std::numeric_limits<int64_t>::max(), &c->capture_memory_budget_bytes));
  RETURN_IF_ERROR(ReadInt32(r, capture, "capture", "max_instances_per_stream", 0, 1 << 20,
                            &c->capture_max_instances_per_stream));
  RETURN_IF_ERROR(r.ReadBool(capture, "capture", "warmup", &c->capture_warmup));

  const YAML::Node limits = YamlReader::Child(root, "limits");
  RETURN_IF_ERROR(
      r.CheckMap(limits, "limits",
                 {"max_message_bytes", "max_queue_length", "request_timeout_ms", "max_tensor_rank",
                  "max_tensor_elements", "max_request_bytes", "max_plan_bytes", "max_upload_bytes",
                  "max_uploaded_models", "max_shared_memory_regions"}));
  RETURN_IF_ERROR(
      r.ReadInt(limits, "limits", "max_upload_bytes", 0, int64_t{1} << 40, &c->max_upload_bytes));
  RETURN_IF_ERROR(
      ReadInt32(r, limits, "limits", "max_uploaded_models", 0, 1 << 16, &c->max_uploaded_models));
  RETURN_IF_ERROR(ReadInt32(r, limits, "limits", "max_shared_memory_regions", 0, 1 << 16,
                            &c->max_shared_memory_regions));
  RETURN_IF_ERROR(
      r.ReadInt(limits, "limits", "max_message_bytes", 0, kMaxInt, &c->max_message_bytes));
  if (c->max_message_bytes > 0 && c->max_message_bytes < 1024) {
    return r.Error(YamlReader::Child(limits, "max_message_bytes"), "limits.max_message_bytes",
                   absl::StrCat("must be 0 (derived) or in [1024, ", kMaxInt, "], got ",
                                c->max_message_bytes));
  }
  RETURN_IF_ERROR(ReadInt32(r, limits, "limits", "max_tensor_rank", 1, 64, &c->max_tensor_rank));
  RETURN_IF_ERROR(r.ReadInt(limits, "limits", "max_tensor_elements", 1, int64_t{1} << 40,
                            &c->max_tensor_elements));
  RETURN_IF_ERROR(r.ReadInt(limits, "limits", "max_request_bytes", 1024, int64_t{1} << 40,
                            &c->max_request_bytes));
  RETURN_IF_ERROR(
      r.ReadInt(limits, "limits", "max_plan_bytes", 1 << 20, int64_t{1} << 50, &c->max_plan_bytes));
  RETURN_IF_ERROR(
      ReadInt32(r, limits, "limits", "max_queue_length", 1, kMaxInt, &c->max_queue_length));
  RETURN_IF_ERROR(r.ReadInt(limits, "limits", "request_timeout_ms", 0,
                            std::numeric_limits<int64_t>::max() / 1000000, &c->request_timeout_ms));

  const YAML::Node shutdown = YamlReader::Child(root, "shutdown");
  RETURN_IF_ERROR(r.CheckMap(shutdown, "shutdown", {"timeout_seconds"}));
  RETURN_IF_ERROR(
      ReadInt32(r, shutdown, "shutdown", "timeout_seconds", 0, 86400, &c->shutdown_timeout_s));

  const YAML::Node log = YamlReader::Child(root, "log");
  RETURN_IF_ERROR(r.CheckMap(log, "log", {"level", "format", "file"}));
  RETURN_IF_ERROR(r.ReadEnum(log, "log", "level",
                             {"trace", "debug", "info", "warn", "error", "off"}, &c->log_level));
  RETURN_IF_ERROR(
      r.ReadEnum(log, "log", "format", {"text", "json", "default", "ISO8601"}, &c->log_format));
  RETURN_IF_ERROR(r.ReadString(log, "log", "file", &c->log_file));
  const YAML::Node http = YamlReader::Child(root, "http");
  RETURN_IF_ERROR(
      r.CheckMap(http, "http", {"restricted_api", "thread_count", "read_timeout_seconds"}));
  RETURN_IF_ERROR(ReadInt32(r, http, "http", "thread_count", 1, 256, &c->http_threads));
  RETURN_IF_ERROR(
      ReadInt32(r, http, "http", "read_timeout_seconds", 1, 86400, &c->http_read_timeout_s));
  std::vector<std::string> specs;
  RETURN_IF_ERROR(r.ReadStringList(http, "http", "restricted_api", &specs));
  for (const std::string& spec : specs) {
    absl::StatusOr<RestrictedProtocol> p = ParseRestrictedProtocol(spec);
    if (!p.ok()) {
      return r.Error(YamlReader::Child(http, "restricted_api"), "http.restricted_api",
                     p.status().message());
    }
    c->http_restricted_apis.push_back(*std::move(p));
  }
  return ParseGrpcSection(r, YamlReader::Child(root, "grpc"), &c->grpc);
}

}  // namespace

int64_t EffectiveMaxMessageBytes(const ServerConfig& config) {
  if (config.max_message_bytes > 0) return config.max_message_bytes;
  return std::min<int64_t>(config.max_request_bytes + (int64_t{1} << 20), kMaxInt);
}

absl::string_view ControlModeName(ControlMode mode) {
  switch (mode) {
    case ControlMode::kExplicit:
      return "explicit";
    case ControlMode::kPoll:
      return "poll";
    case ControlMode::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<ServerConfig> ParseServerConfig(absl::string_view yaml_text,
                                               absl::string_view source) {
  YamlReader reader{std::string(source)};
  ASSIGN_OR_RETURN(YAML::Node root, reader.Parse(yaml_text));
  ServerConfig config;
  try {
    RETURN_IF_ERROR(ParseInto(reader, root, &config));
  } catch (const YAML::Exception& e) {
    // Reading a well-formed tree should not throw; never let it escape if it does.
    return absl::InvalidArgumentError(absl::StrCat(source, " line ", e.mark.line + 1, ": ", e.msg));
  }
  return config;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<ServerConfig> LoadServerConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseServerConfig(text, path);
}

}  // namespace reprise::config
