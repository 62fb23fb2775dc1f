// A model's configuration as Triton writes it: `config.pbtxt` (protobuf text format) or
// `config.yaml` (the same field names in YAML), both read into inference.ModelConfig
// (proto/model_config.proto) and turned into ModelSettings by one validation path, with Triton's
// auto-complete for ONNX models. Every error names the file, the line and the field.
#ifndef REPRISE_CONFIG_MODEL_CONFIG_H_
#define REPRISE_CONFIG_MODEL_CONFIG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/model_settings.h"
#include "model_config.pb.h"

namespace reprise::config {

inline constexpr absl::string_view kModelConfigText = "config.pbtxt";
inline constexpr absl::string_view kModelConfigYaml = "config.yaml";

/// Where the fields of one parsed config were written: the source (a path, or e.g. "config
/// override") and, per field path ("max_batch_size", "input[0].dims",
/// "dynamic_batching.preferred_batch_size"), its 1-based line. A config built in memory (a
/// JSON override) has no lines; its messages name the source and the field only.
class ConfigLocations {
 public:
  explicit ConfigLocations(std::string source = "") : source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  void Set(const std::string& path, int line) { lines_.emplace(path, line); }
  /// True when the field was written in the source (an explicit 0 included).
  bool Has(absl::string_view path) const { return lines_.contains(path); }
  /// The line of `path`, else of its nearest written parent; 0 when none is known.
  int Line(absl::string_view path) const;
  /// INVALID_ARGUMENT `<source> line N: field "<path>": <what>` (no line part when unknown).
  absl::Status Error(absl::string_view path, absl::string_view what) const;

  /// A field the text parser skipped because the message has no such field (the contents of
  /// a feature Reprise refuses, or a typo): reported after the refusals, so that a refused
  /// feature is named rather than its first unknown field.
  void AddUnknown(int line, std::string message) {
    unknown_.emplace_back(line, std::move(message));
  }
  const std::vector<std::pair<int, std::string>>& unknown() const { return unknown_; }

 private:
  std::string source_;
  absl::flat_hash_map<std::string, int> lines_;
  std::vector<std::pair<int, std::string>> unknown_;
};

/// A config as read, before validation.
struct ParsedModelConfig {
  inference::ModelConfig config;
  ConfigLocations locations;
};

/// Parses protobuf text format (config.pbtxt). A syntax error, an unknown enum value or a
/// wrong type is INVALID_ARGUMENT `<source> line L column C: <parser message>`.
absl::StatusOr<ParsedModelConfig> ParseModelConfigText(absl::string_view text,
                                                       absl::string_view source);
/// Parses YAML with ModelConfig's field names (config.yaml). Unknown keys, wrong types and
/// out-of-range numbers are INVALID_ARGUMENT naming the source, the line and the key.
absl::StatusOr<ParsedModelConfig> ParseModelConfigYaml(absl::string_view text,
                                                       absl::string_view source);
/// Reads `<model_dir>/config.pbtxt` or `<model_dir>/config.yaml`: both present is
/// INVALID_ARGUMENT naming both; neither is an empty config (source "<model_dir> (no config
/// file)"). At most `max_bytes` are read (a larger file is INVALID_ARGUMENT).
absl::StatusOr<ParsedModelConfig> ReadModelConfigDir(const std::string& model_dir,
                                                     int64_t max_bytes = int64_t{1} << 20);

/// A tensor of a model's graph, for auto-complete. `dims` has -1 for a dimension that is not
/// fixed (symbolic or unknown); `has_shape` is false when the graph declares no shape.
struct GraphTensor {
  std::string name;
  TensorType type = TensorType::kInvalid;
  bool has_shape = false;
  std::vector<int64_t> dims;
};
struct GraphTensors {
  std::vector<GraphTensor> inputs;
  std::vector<GraphTensor> outputs;
};

/// Triton's auto-complete (`--disable-auto-complete-config` turns it off;
/// `--backend-config=onnxruntime,default-max-batch-size=N` sets the default).
struct AutoComplete {
  bool enabled = true;
  int default_max_batch_size = 4;
};

/// The version policy of a config alone (checked as ModelSettingsFromConfig checks it), for
/// choosing the version whose graph completes the rest.
absl::StatusOr<VersionPolicy> VersionPolicyFromConfig(const ParsedModelConfig& parsed);

/// THE validation path of every model config (config.pbtxt, config.yaml, a JSON override):
/// refuses the fields Reprise does not implement by name, checks every value, and, when
/// `graph` is given and `auto_complete.enabled`, completes the settings as Triton does for
/// ONNX models: inputs and outputs from the graph when the config lists none; when the config
/// does not write max_batch_size and every graph input and output has a variable first
/// dimension, max_batch_size = default_max_batch_size with dynamic batching on (when > 1).
/// `model_dir_name`: `name` may be left out but must equal it when given. Thread-safe.
absl::StatusOr<ModelSettings> ModelSettingsFromConfig(const ParsedModelConfig& parsed,
                                                      absl::string_view model_dir_name,
                                                      const GraphTensors* graph = nullptr,
                                                      const AutoComplete& auto_complete = {});

/// Parses one model's config.yaml and validates it (no graph, so no auto-complete): errors
/// are INVALID_ARGUMENT naming `source`, the line and the key. Thread-safe.
absl::StatusOr<ModelSettings> ParseModelSettings(absl::string_view yaml_text,
                                                 absl::string_view source,
                                                 absl::string_view model_dir_name);

}  // namespace reprise::config

#endif  // REPRISE_CONFIG_MODEL_CONFIG_H_
