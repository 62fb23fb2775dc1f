// The server's view of an inference engine: load one model version from its directory, report
// its tensors, run one inference on host tensors. The engine (runtime/engine) plugs in behind
// this interface; tests use a fake.
#ifndef REPRISE_SERVER_MODEL_BACKEND_H_
#define REPRISE_SERVER_MODEL_BACKEND_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "config/model_config.h"
#include "config/model_settings.h"
#include "runtime/core/data_type.h"

namespace reprise::server {

/// One input or output as the model declares it.
struct TensorInfo {
  std::string name;
  runtime::DataType dtype = runtime::DataType::kUndefined;  // kString is KServe's BYTES
  /// The full shape, batch dimension included; -1 marks a dimension of any size.
  std::vector<int64_t> shape;
};

struct ModelSignature {
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

/// An input of one inference. `data` is borrowed (from the request, or from storage the caller
/// keeps) for the duration of Infer. Row-major, little-endian; for kString, the KServe
/// serialized form: per element a 4-byte little-endian length, then the bytes.
struct InputTensor {
  std::string name;
  runtime::DataType dtype = runtime::DataType::kUndefined;
  runtime::Shape shape;
  absl::string_view data;
};

/// An output of one inference, owned. Same layout rules as InputTensor.
struct OutputTensor {
  std::string name;
  runtime::DataType dtype = runtime::DataType::kUndefined;
  runtime::Shape shape;
  std::string data;
};

/// A runtime instance (captured shape on a stream) as the admin service lists it.
struct RuntimeInstanceInfo {
  int stream = 0;
  std::string shape_signature;
  int64_t bucket = 0;
  std::string state;
  uint64_t captures = 0;
  uint64_t replays = 0;
  uint64_t capture_time_ns = 0;
  uint64_t arena_bytes = 0;
  uint64_t last_used_ms = 0;
  int intra_op_threads = 0;    // the threads its plan's kernels use
  std::string threads_choice;  // how they were chosen (StreamInstanceInfo::threads_choice)
  std::string part;            // PREFIX or TAIL of a cut model, else empty
};

/// Where the time of one Infer went, filled by the backend (zero where it has no queue).
struct InferTimings {
  int64_t queue_ns = 0;           // waiting in the model's queue (for a batch and a stream)
  int64_t compute_input_ns = 0;   // assembling the batch (concatenating, padding)
  int64_t compute_ns = 0;         // running on the stream (staging, execution, reading outputs)
  int64_t compute_output_ns = 0;  // slicing this request's rows out of the batch's outputs
  /// The execution the request was part of: its rows over all its requests (padding not
  /// included; 0: unknown), and whether this request is the one that accounts for it (exactly
  /// one request of each execution does, so that execution counts add up).
  int64_t batch_size = 0;
  bool counts_execution = true;
};

/// How to schedule one Infer (request parameters `priority` and `timeout`, the deadline).
struct InferOptions {
  uint64_t priority = 0;   // 1 is the highest level; 0: the model's default level
  int64_t timeout_us = 0;  // longest wait in the queue; 0: the model's default
  absl::Time deadline = absl::InfiniteFuture();  // answered DEADLINE_EXCEEDED if still queued
};

/// Capture and instance-cache totals of a loaded version (for statistics and metrics).
/// Upper bounds, in seconds, of the capture-time histogram (reprise_capture_duration_seconds).
inline constexpr std::array<double, 7> kCaptureTimeBounds = {0.00001, 0.0001, 0.001, 0.01,
                                                             0.1,     1.0,    10.0};

/// Every capture's time since the load (evicted instances included), so it only grows.
struct CaptureTimeHistogram {
  // counts[i]: captures that took at most kCaptureTimeBounds[i] and more than the bound
  // before; counts.back(): above the largest bound.
  std::array<uint64_t, kCaptureTimeBounds.size() + 1> counts{};
  double sum_seconds = 0;
  void Observe(double seconds) {
    size_t i = 0;
    while (i < kCaptureTimeBounds.size() && seconds > kCaptureTimeBounds[i]) ++i;
    ++counts[i];
    sum_seconds += seconds;
  }
};

struct CaptureStats {
  uint64_t captures = 0;
  uint64_t replays = 0;
  uint64_t eager_runs = 0;
  uint64_t evictions = 0;
  uint64_t capture_failures = 0;
  uint64_t budget_refusals = 0;
  uint64_t value_plans = 0;  // plans made for input values (StreamSessionCounters)
  /// Tensor bytes copied on the request path: into the plans' input buffers (a request's
  /// inputs once, a batch's by one gather) and out of them into the responses (once).
  uint64_t input_bytes_copied = 0;
  uint64_t output_bytes_copied = 0;
  uint64_t live_instances = 0;
  uint64_t live_bytes = 0;
  uint64_t warmup_instances = 0;      // instances captured by the warm-up at load
  int64_t warmup_ns = 0;              // the warm-up's time (part of the load time)
  int64_t load_ns = 0;                // the whole load, warm-up included
  CaptureTimeHistogram capture_time;  // every capture, warm-up included
};

/// A profile of one model version (LoadedModel::Profile).
struct ModelProfile {
  std::string trace_json;  // Chrome trace event format
  std::string table;       // text: top steps, time per op type, share outside kernels
};

/// One loaded model version. Made by ModelBackend::Load; destroyed by the repository once no
/// request uses it any more.
class LoadedModel {
 public:
  virtual ~LoadedModel() = default;

  /// The tensors; fixed for the object's lifetime.
  virtual const ModelSignature& signature() const = 0;

  /// Called once with the result of InferAsync and its timings.
  using InferDone =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<OutputTensor>>, const InferTimings&) &&>;

  /// Runs one inference; `done` runs once, on this thread or on one of the backend's, when the
  /// result is there. `inputs` are in the order of signature().inputs and already checked
  /// against it (dtype, rank, fixed dimensions, byte size): nothing below checks them again.
  /// `outputs` names the outputs wanted (a subset of signature().outputs, no duplicates).
  /// `inputs` and `outputs` are borrowed until `done` is called. `options` schedule it
  /// (priority, timeout, deadline); a backend without a queue ignores them. Thread-safe:
  /// called concurrently.
  virtual void InferAsync(std::span<const InputTensor> inputs, std::span<const std::string> outputs,
                          const InferOptions& options, InferDone done) = 0;

  /// True when InferAsync never holds the calling thread for long: it queues the work, or runs
  /// it in place only when that is short. The server then calls it on the RPC's own thread;
  /// otherwise from its inference pool.
  virtual bool InfersWithoutBlocking() const { return false; }

  /// InferAsync, waited for (tools and tests); `timings`, when not null, receives the call's.
  absl::StatusOr<std::vector<OutputTensor>> Infer(std::span<const InputTensor> inputs,
                                                  std::span<const std::string> outputs,
                                                  const InferOptions& options,
                                                  InferTimings* timings);
  absl::StatusOr<std::vector<OutputTensor>> Infer(std::span<const InputTensor> inputs,
                                                  std::span<const std::string> outputs,
                                                  InferTimings* timings) {
    return Infer(inputs, outputs, InferOptions{}, timings);
  }

  /// Capture totals (zeros for a backend without capture). Thread-safe.
  virtual CaptureStats capture_stats() const { return {}; }

  /// The runtime instances made so far (none for a backend without capture). Thread-safe.
  virtual std::vector<RuntimeInstanceInfo> ListRuntimeInstances() const { return {}; }

  /// A JSON dump of one runtime instance; NOT_FOUND when there is none. Thread-safe.
  virtual absl::StatusOr<std::string> DumpRuntimeInstance(int stream,
                                                          absl::string_view shape_signature,
                                                          bool verbose) const {
    (void)verbose;
    return absl::NotFoundError(absl::StrCat("no runtime instance on stream ", stream,
                                            " for shape \"", shape_signature, "\""));
  }

  /// Profiles the model on a stream of its own (runtime/engine/profiler.h): `iterations` runs
  /// of its declared input shapes, replayed (or the eager step loop when `eager`), with the
  /// `top` steps in the table. Serving streams are not touched. UNIMPLEMENTED for a backend
  /// without a profiler. Thread-safe.
  virtual absl::StatusOr<ModelProfile> Profile(int iterations, int top, bool eager) const {
    (void)iterations;
    (void)top;
    (void)eager;
    return absl::UnimplementedError("this backend has no profiler");
  }
};

/// What to load.
struct LoadSpec {
  std::string model_name;
  int64_t version = 0;
  /// <repo>/<model>/<version>, or the same below an upload directory. Read during Load only:
  /// uploaded files are removed once another load replaces them, while the model may serve.
  std::string version_dir;
  std::string model_path;                           // <version_dir>/model.onnx
  const config::ModelSettings* settings = nullptr;  // borrowed for the call
  int streams = 1;                                  // streams this model may use
  int max_queue_length = 1024;  // requests that may wait for a stream; more: RESOURCE_EXHAUSTED
};

/// Memory accounting of one device, in bytes (for the metrics).
struct DeviceMemoryInfo {
  std::string device;
  uint64_t in_use = 0;  // device memory (arenas, weights)
  uint64_t peak = 0;
  uint64_t pinned_in_use = 0;  // pinned host memory (staging)
  uint64_t pinned_peak = 0;
};

/// Loads model versions. Implementations must be thread-safe: versions of different models load
/// concurrently. Load may block (it runs on a loader thread, never on a gRPC thread).
class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const LoadSpec& spec) = 0;
  /// The inputs and outputs of the model file at `model_path` as its graph declares them, for
  /// Triton's auto-complete (config/model_config.h), without preparing it for serving.
  /// UNIMPLEMENTED (the default): the backend cannot tell; configs are then not completed.
  /// Thread-safe; may block like Load.
  virtual absl::StatusOr<config::GraphTensors> ReadGraphTensors(
      const std::string& model_path) const {
    return absl::UnimplementedError(
        absl::StrCat("this backend cannot read the tensors of ", model_path));
  }
  /// Memory in use and peak per device the backend runs on (none by default). Thread-safe.
  virtual std::vector<DeviceMemoryInfo> MemoryUsage() const { return {}; }
};

}  // namespace reprise::server

#endif  // REPRISE_SERVER_MODEL_BACKEND_H_
