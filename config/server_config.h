// The daemon's configuration (one YAML file, every field with a default; see config/README.md).
#ifndef REPRISE_CONFIG_SERVER_CONFIG_H_
#define REPRISE_CONFIG_SERVER_CONFIG_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/grpc_config.h"

namespace reprise::config {

/// How models get loaded (Triton's --model-control-mode).
enum class ControlMode {
  kNone,      // load every model of the repository at start; load / unload RPCs are refused
  kExplicit,  // load only `load_models` at start; the rest by RepositoryModelLoad / Unload
  kPoll,      // load every model at start, then apply the repository's changes every
              // poll_seconds; load / unload RPCs are refused
};

/// "none" / "explicit" / "poll".
absl::string_view ControlModeName(ControlMode mode);

/// Every setting of the daemon. The defaults here are the defaults of the file.
struct ServerConfig {
  // server:
  std::string listen_address = "0.0.0.0";
  int grpc_port = 8001;         // 0 picks a free port (tests)
  int metrics_port = 8002;      // Prometheus /metrics on listen_address; 0 picks a free port
  bool allow_metrics = true;    // false: no metrics port at all
  std::string metrics_address;  // /metrics listen address; empty = listen_address
  /// reprise_grpc_server_inflight_calls: counts every gRPC call through a server interceptor,
  /// which costs about 12 µs of CPU per call (a tenth of a small model's whole request), so it
  /// is off unless asked for.
  bool grpc_inflight_metric = false;
  // HTTP/REST (KServe v2) endpoint; Triton's --allow-http, --http-port, --http-address.
  bool allow_http = true;
  int http_port = 8000;      // 0 picks a free port (tests)
  std::string http_address;  // empty = listen_address
  // http:
  std::vector<RestrictedProtocol> http_restricted_apis;  // --http-restricted-api
  int http_threads = 2;                                  // I/O threads of the HTTP listener
  int http_read_timeout_s = 60;  // to receive one request, and idle keep-alive connections
  // grpc: TLS, access control, resource limits, keepalive
  GrpcConfig grpc;
  // Ready (ServerReady, gRPC health "") only while every model asked for at startup loaded;
  // false: ready once the startup loads finished, whatever their outcome.
  bool strict_readiness = true;
  // repository:
  std::vector<std::string> model_repositories = {"/models"};
  ControlMode control_mode = ControlMode::kNone;
  std::vector<std::string> load_models;  // explicit mode: loaded at start ("*" = all)
  int load_threads = 4;                  // models loaded at the same time
  int poll_seconds = 15;                 // poll mode: seconds between two scans
  // Triton's auto-complete of model configs from the ONNX graph (config/model_config.h).
  bool auto_complete_config = true;
  int default_max_batch_size = 4;  // --backend-config=onnxruntime,default-max-batch-size=N
  // Exit (status 1) when a model asked for at startup fails to load (Triton's --exit-on-error).
  bool exit_on_error = false;
  // Where files uploaded with RepositoryModelLoad (`file:` parameters) are written, mode 0700;
  // empty = a new directory under $TMPDIR, removed at exit. Never a model repository.
  std::string upload_dir;
  // runtime:
  int streams_per_device = 2;  // default stream count for a model without instance_group
  int cpu_threads = 0;         // threads for inference; 0 = the CPUs (server/cpu_budget.h)
  // Threads of one kernel on a stream (oneDNN); 0 = the cores shared out among a model's
  // streams. A model's streams x threads is kept within the cores.
  int intra_op_threads = 0;
  // Time a small model's new plan against plans of fewer intra-op threads and keep the fastest
  // (runtime::engine::StreamSessionOptions::choose_threads).
  bool choose_threads = true;
  // kernels: the choices of the CPU device's kernels (kernels::cpu::CpuKernelOptions)
  bool kernels_conv_winograd = true;               // Winograd for 3x3 convolutions
  bool kernels_conv_taps_as_channels = true;       // KxK as 1x1 over gathered taps (AVX2)
  bool kernels_conv_tap_regions = true;            // per-tap products; im2col raced vs direct
  bool kernels_conv_own_depthwise = true;          // our depthwise / narrow-group kernel, blocked
  std::string kernels_conv_chain_layout = "auto";  // conv chains: auto (blocked) or nhwc
  std::string kernels_clear_outputs = "auto";      // clear large step buffers first: auto, on, off
  // limits: what one request may ask for (config/README.md, "Limits"). Checked before any
  // allocation; a request over one gets RESOURCE_EXHAUSTED (INVALID_ARGUMENT for a shape that
  // cannot exist) naming the limit.
  int max_tensor_rank = 16;                        // dimensions of one input
  int64_t max_tensor_elements = int64_t{1} << 28;  // per input, and per dimension
  int64_t max_request_bytes = int64_t{64} << 20;   // all input data of one request
  int64_t max_plan_bytes = int64_t{2} << 30;       // one plan: arena, workspaces, buffers
  // gRPC send / receive; 0 = derived: max_request_bytes plus 1 MiB for the message's framing.
  int64_t max_message_bytes = 0;
  int max_queue_length = 1024;                   // inference requests in flight in the whole server
  int64_t max_upload_bytes = int64_t{64} << 20;  // the files of one RepositoryModelLoad
  int max_uploaded_models = 16;                  // models served from uploaded files at once
  int max_shared_memory_regions = 64;            // system shared-memory regions registered
  int64_t request_timeout_ms = 0;                // 0 = no server-side timeout
  // batching: defaults for models whose dynamic_batching block leaves a key out
  int64_t batching_max_queue_delay_us = 0;
  int64_t batching_default_timeout_us = 0;  // 0 = none
  // capture:
  // Plans and instances of the whole server (arenas and plan buffers); a hard cap: a run whose
  // plan cannot fit even after evicting gets RESOURCE_EXHAUSTED. 0 = no limit.
  int64_t capture_memory_budget_bytes = 0;
  int capture_max_instances_per_stream = 16;  // per model and stream (LRU); 0 = no bound
  bool capture_warmup = false;                // capture every bucket at load, before READY
  // shutdown:
  int shutdown_timeout_s = 30;  // in-flight requests get this long after SIGTERM
  // log:
  std::string log_level = "info";   // trace, debug, info, warn, error, off
  std::string log_format = "text";  // text, json, or Triton's default / ISO8601
  std::string log_file;             // empty: standard output
};

/// limits.max_message_bytes as used: the configured value, or the one derived from
/// max_request_bytes when it is 0.
int64_t EffectiveMaxMessageBytes(const ServerConfig& config);

/// Parses a server config from YAML text. `source` names it in messages (e.g. its path).
/// Unknown keys, wrong types and out-of-range values are INVALID_ARGUMENT errors naming the
/// key and its line. Thread-safe (no shared state).
absl::StatusOr<ServerConfig> ParseServerConfig(absl::string_view yaml_text,
                                               absl::string_view source);

/// Reads and parses the file at `path`; NOT_FOUND if it cannot be read.
absl::StatusOr<ServerConfig> LoadServerConfigFile(const std::string& path);

/// Reads a whole file into a string; NOT_FOUND naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace reprise::config

#endif  // REPRISE_CONFIG_SERVER_CONFIG_H_
