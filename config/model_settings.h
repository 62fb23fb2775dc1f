// Per-model settings, validated, with Triton's field names: what config.pbtxt / config.yaml
// (config/model_config.h) and auto-complete make of a model's configuration.
#ifndef REPRISE_CONFIG_MODEL_SETTINGS_H_
#define REPRISE_CONFIG_MODEL_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reprise::config {

/// Tensor element types by their model-config names; the numbers are those of
/// model_config.proto's DataType enum (TYPE_BOOL = 1 ... TYPE_BF16 = 14).
enum class TensorType : int {
  kInvalid = 0,
  kBool = 1,
  kUInt8 = 2,
  kUInt16 = 3,
  kUInt32 = 4,
  kUInt64 = 5,
  kInt8 = 6,
  kInt16 = 7,
  kInt32 = 8,
  kInt64 = 9,
  kFp16 = 10,
  kFp32 = 11,
  kFp64 = 12,
  kString = 13,
  kBf16 = 14,
};

/// "TYPE_FP32" for kFp32, "TYPE_INVALID" for anything unknown.
absl::string_view TensorTypeName(TensorType type);
/// The type named `name` ("TYPE_FP32"); INVALID_ARGUMENT for any other string.
absl::StatusOr<TensorType> TensorTypeFromName(absl::string_view name);

/// One `input` or `output` entry.
struct TensorSettings {
  std::string name;
  TensorType data_type = TensorType::kInvalid;
  std::vector<int64_t> dims;  // without the batch dimension when max_batch_size > 0; -1 = any
  /// Outputs only: a file in the model's directory with one class label per line, for the
  /// classification extension; empty: none.
  std::string label_filename;
  /// The lines of label_filename, read by the model repository when the model loads.
  std::vector<std::string> labels;
};

/// Which versions of a model to serve.
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_versions = 1;           // kLatest
  std::vector<int64_t> versions;  // kSpecific
};

/// One `instance_group` entry; `count` is the number of streams of the model.
struct InstanceGroup {
  int count = 1;
  /// KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL. KIND_GPU runs the model on a CUDA device
  /// (`gpus`); the others on the CPU. A KIND_AUTO group that lists `gpus` is KIND_GPU.
  std::string kind = "KIND_AUTO";
  /// KIND_GPU only: the CUDA device indices (`cuda:N`); empty: GPU 0.
  std::vector<int> gpus;
};

/// `dynamic_batching.default_queue_policy` (Triton's ModelQueuePolicy, the keys Reprise uses).
struct QueuePolicy {
  int max_queue_size = 0;  // requests queued for the model; 0: max_queue_size / the server's
  /// A request queued longer is answered DEADLINE_EXCEEDED without running; 0: the server's
  /// batching.default_timeout_microseconds (0 there too: none).
  int64_t default_timeout_microseconds = 0;
};

/// `dynamic_batching`: requests are queued and run in batches (see server/dynamic_batcher.h).
struct DynamicBatching {
  std::vector<int64_t> preferred_batch_size;  // ascending, unique
  /// How long the oldest queued request waits for a fuller batch; unset: the server's
  /// batching.max_queue_delay_microseconds.
  std::optional<int64_t> max_queue_delay_microseconds;
  int priority_levels = 0;         // 0: one level (request priorities other than 0/1 refused)
  int default_priority_level = 0;  // 0: the lowest level (= priority_levels)
  QueuePolicy default_queue_policy;
};

/// `capture`: which batch sizes get captured instances and how many instances are kept.
struct CaptureSettings {
  /// Batch sizes (ascending, unique, each <= max_batch_size); a batch is padded up to the
  /// nearest, one above the largest runs eagerly. Empty: powers of two up to max_batch_size
  /// (and max_batch_size itself). Only for models with max_batch_size > 0.
  std::vector<int64_t> buckets;
  std::optional<bool> warmup;                   // unset: the server's capture.warmup
  std::optional<int> max_instances_per_stream;  // unset: the server's; 0: no bound
};

/// Triton's names for ONNX models (ModelConfig.platform and .backend); "onnx" is accepted too.
inline constexpr absl::string_view kOnnxPlatform = "onnxruntime_onnx";
inline constexpr absl::string_view kOnnxBackend = "onnxruntime";

/// A model's settings. Every field has a default, so a model without a config file is valid.
struct ModelSettings {
  std::string name;  // the directory name
  std::string platform = std::string(kOnnxPlatform);
  std::string backend = std::string(kOnnxBackend);
  int max_batch_size = 0;  // > 0: inputs and outputs get an implicit leading batch dimension
  /// Requests that may wait for a free stream of this model (more are refused with
  /// RESOURCE_EXHAUSTED); 0: the server's limits.max_queue_length. A Reprise key (Triton's
  /// nearest is dynamic_batching.default_queue_policy.max_queue_size).
  int max_queue_size = 0;
  std::vector<TensorSettings> inputs;
  std::vector<TensorSettings> outputs;
  std::vector<InstanceGroup> instance_groups;  // empty: the server's streams_per_device
  VersionPolicy version_policy;
  std::optional<DynamicBatching> dynamic_batching;
  CaptureSettings capture;
};

/// The capture buckets of `settings`: its `capture.buckets`, or the default (powers of two up
/// to max_batch_size, and max_batch_size); empty when max_batch_size is 0.
std::vector<int64_t> CaptureBuckets(const ModelSettings& settings);

}  // namespace reprise::config

#endif  // REPRISE_CONFIG_MODEL_SETTINGS_H_
