// The one validation path from inference.ModelConfig to ModelSettings, with Triton's
// auto-complete for ONNX models (config/model_config.h).
#include "config/model_config.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "config/model_config_paths.h"
#include "google/protobuf/descriptor.h"
#include "runtime/base/status_macros.h"

namespace reprise::config {
namespace {

using internal::Index;
using internal::IsPlaceholder;
using internal::Join;

namespace pb = google::protobuf;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

// The fields Reprise implements, per message. Any other field that is set is refused by name.
const absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>& Supported() {
  static const auto* table = new absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>{
      {"inference.ModelConfig",
       {"name", "platform", "backend", "version_policy", "max_batch_size", "input", "output",
        "instance_group", "dynamic_batching", "default_model_filename", "capture",
        "max_queue_size"}},
      {"inference.ModelInput", {"name", "data_type", "format", "dims"}},
      {"inference.ModelOutput", {"name", "data_type", "dims", "label_filename"}},
      {"inference.ModelInstanceGroup", {"name", "count", "kind", "gpus"}},
      {"inference.ModelVersionPolicy", {"latest", "all", "specific"}},
      {"inference.ModelVersionPolicy.Latest", {"num_versions"}},
      {"inference.ModelVersionPolicy.All", {}},
      {"inference.ModelVersionPolicy.Specific", {"versions"}},
      {"inference.ModelDynamicBatching",
       {"preferred_batch_size", "max_queue_delay_microseconds", "priority_levels",
        "default_priority_level", "default_queue_policy"}},
      {"inference.ModelQueuePolicy",
       {"max_queue_size", "default_timeout_microseconds", "allow_timeout_override"}},
      {"inference.ModelCapture", {"buckets", "warmup", "max_instances_per_stream"}},
  };
  return *table;
}

// Fields whose mere presence asks for something, even as an empty block.
bool PresenceMatters(const pb::FieldDescriptor* field) {
  const std::string& name = field->full_name();
  return name == "inference.ModelConfig.sequence_batching" ||
         name == "inference.ModelConfig.ensemble_scheduling" ||
         name == "inference.ModelInput.reshape" || name == "inference.ModelOutput.reshape";
}

// Refuses every set field that Reprise does not implement, naming it. An empty block of a
// feature (`response_cache { enable: false }`, `optimization {}`) asks for nothing and passes,
// except where presence alone turns something on (PresenceMatters).
absl::Status RefuseUnsupported(const pb::Message& message, const std::string& path,
                               const ConfigLocations& at) {
  const pb::Descriptor* d = message.GetDescriptor();
  const pb::Reflection* r = message.GetReflection();
  const auto& table = Supported();
  const auto supported = table.find(d->full_name());
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string fpath = Join(path, field->name());
    const bool is_message = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
    if (supported != table.end() && supported->second.contains(field->name())) {
      if (!is_message || field->is_map()) continue;
      if (field->is_repeated()) {
        for (int i = 0; i < r->FieldSize(message, field); ++i) {
          RETURN_IF_ERROR(RefuseUnsupported(r->GetRepeatedMessage(message, field, i),
                                            Index(fpath, static_cast<size_t>(i)), at));
        }
      } else {
        RETURN_IF_ERROR(RefuseUnsupported(r->GetMessage(message, field), fpath, at));
      }
      continue;
    }
    if (is_message && !field->is_repeated() && !IsPlaceholder(field->message_type()) &&
        !PresenceMatters(field) && r->GetMessage(message, field).ByteSizeLong() == 0) {
      continue;
    }
    return at.Error(fpath,
                    "is a Triton feature that Reprise does not implement; it is refused rather "
                    "than ignored (see docs/triton-migration.md)");
  }
  return absl::OkStatus();
}

template <typename Tensor>
absl::Status CheckTensors(const ConfigLocations& at, absl::string_view key,
                          const google::protobuf::RepeatedPtrField<Tensor>& list,
                          std::vector<TensorSettings>* out) {
  constexpr bool is_input = std::is_same_v<Tensor, inference::ModelInput>;
  for (int i = 0; i < list.size(); ++i) {
    const std::string path = Index(key, static_cast<size_t>(i));
    const Tensor& tensor = list[i];
    TensorSettings t;
    t.name = tensor.name();
    const inference::DataType type = tensor.data_type();
    const google::protobuf::RepeatedField<int64_t>* dims = &tensor.dims();
    if constexpr (!is_input) t.label_filename = tensor.label_filename();
    if (t.name.empty()) return at.Error(path, "needs a non-empty \"name\"");
    if (type == inference::TYPE_INVALID || !inference::DataType_IsValid(type)) {
      return at.Error(Join(path, "data_type"), "needs a \"data_type\" (e.g. TYPE_FP32)");
    }
    t.data_type = static_cast<TensorType>(type);
    if (dims->empty()) {
      return at.Error(
          Join(path, "dims"),
          "needs \"dims\" (a list; rank must be at least 1; -1 for a variable dimension)");
    }
    for (int64_t d : *dims) {
      if (d < -1 || d > kMaxInt) {
        return at.Error(Join(path, "dims"),
                        absl::StrCat("dimension ", d, " is not -1 or in [0, ", kMaxInt, "]"));
      }
    }
    t.dims.assign(dims->begin(), dims->end());
    for (const TensorSettings& other : *out) {
      if (other.name == t.name) {
        return at.Error(path, absl::StrCat(is_input ? "input" : "output", " \"", t.name,
                                           "\" is declared twice"));
      }
    }
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status CheckVersionPolicy(const inference::ModelConfig& c, const ConfigLocations& at,
                                VersionPolicy* p) {
  const inference::ModelVersionPolicy& v = c.version_policy();
  // A oneof keeps the last member written; YAML can name several, which is a mistake.
  int written = 0;
  for (const char* kind : {"latest", "all", "specific"}) {
    written += at.Has(absl::StrCat("version_policy.", kind)) ? 1 : 0;
  }
  if (written > 1) {
    return at.Error("version_policy", "must have exactly one of latest, all, specific");
  }
  switch (v.policy_choice_case()) {
    case inference::ModelVersionPolicy::kLatest: {
      const uint32_t n = v.latest().num_versions();
      if (n > 1024 || (n == 0 && at.Has("version_policy.latest.num_versions"))) {
        return at.Error("version_policy.latest.num_versions",
                        absl::StrCat("must be in [1, 1024], got ", n));
      }
      p->kind = VersionPolicy::Kind::kLatest;
      p->num_versions = n == 0 ? 1 : static_cast<int>(n);
      break;
    }
    case inference::ModelVersionPolicy::kAll:
      p->kind = VersionPolicy::Kind::kAll;
      break;
    case inference::ModelVersionPolicy::kSpecific:
      p->kind = VersionPolicy::Kind::kSpecific;
      if (v.specific().versions().empty()) {
        return at.Error("version_policy.specific.versions", "must list a version");
      }
      for (int64_t version : v.specific().versions()) {
        if (version < 1) {
          return at.Error("version_policy.specific.versions",
                          absl::StrCat("version ", version, " is not a positive integer"));
        }
        p->versions.push_back(version);
      }
      break;
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

constexpr int kMaxInstances = 1024;  // instances of one model, all groups together
constexpr int kMaxBuckets = 64;      // capture.buckets

// A list of batch sizes: each 1 ... max_batch_size (when > 0), strictly ascending.
absl::Status CheckSizes(const ConfigLocations& at, absl::string_view path,
                        const std::vector<int64_t>& sizes, int max_batch_size) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || sizes[i] > kMaxInt) {
      return at.Error(path, absl::StrCat(sizes[i], " is not a batch size (1 or more)"));
    }
    if (max_batch_size > 0 && sizes[i] > max_batch_size) {
      return at.Error(path, absl::StrCat(sizes[i], " exceeds max_batch_size ", max_batch_size));
    }
    if (i > 0 && sizes[i] <= sizes[i - 1]) {
      return at.Error(path, absl::StrCat("must be ascending without repeats (", sizes[i - 1],
                                         " then ", sizes[i], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBatching(const inference::ModelConfig& c, const ConfigLocations& at,
                           ModelSettings* s) {
  if (!c.has_dynamic_batching()) return absl::OkStatus();
  const inference::ModelDynamicBatching& d = c.dynamic_batching();
  constexpr int64_t kMaxMicros = std::numeric_limits<int64_t>::max() / 1000;
  DynamicBatching b;
  b.preferred_batch_size.assign(d.preferred_batch_size().begin(), d.preferred_batch_size().end());
  if (d.has_max_queue_delay_microseconds()) {
    if (d.max_queue_delay_microseconds() > static_cast<uint64_t>(kMaxMicros)) {
      return at.Error("dynamic_batching.max_queue_delay_microseconds", "is too large");
    }
    b.max_queue_delay_microseconds = static_cast<int64_t>(d.max_queue_delay_microseconds());
  }
  if (d.priority_levels() > 1024) {
    return at.Error("dynamic_batching.priority_levels",
                    absl::StrCat("must be in [0, 1024], got ", d.priority_levels()));
  }
  b.priority_levels = static_cast<int>(d.priority_levels());
  const uint64_t level = d.default_priority_level();
  if (level > static_cast<uint64_t>(std::max(b.priority_levels, 1))) {
    return at.Error("dynamic_batching.default_priority_level",
                    absl::StrCat(level, " exceeds priority_levels ", b.priority_levels));
  }
  b.default_priority_level = static_cast<int>(level);
  const inference::ModelQueuePolicy& q = d.default_queue_policy();
  if (q.max_queue_size() > kMaxInt) {
    return at.Error("dynamic_batching.default_queue_policy.max_queue_size", "is too large");
  }
  b.default_queue_policy.max_queue_size = static_cast<int>(q.max_queue_size());
  if (q.default_timeout_microseconds() > static_cast<uint64_t>(kMaxMicros)) {
    return at.Error("dynamic_batching.default_queue_policy.default_timeout_microseconds",
                    "is too large");
  }
  b.default_queue_policy.default_timeout_microseconds =
      static_cast<int64_t>(q.default_timeout_microseconds());
  s->dynamic_batching = std::move(b);
  return absl::OkStatus();
}

// The checks that depend on max_batch_size (which auto-complete may set).
absl::Status CheckBatchSizes(const ConfigLocations& at, const ModelSettings& s) {
  if (s.dynamic_batching.has_value()) {
    RETURN_IF_ERROR(CheckSizes(at, "dynamic_batching.preferred_batch_size",
                               s.dynamic_batching->preferred_batch_size, s.max_batch_size));
  }
  if (!s.capture.buckets.empty() && s.max_batch_size == 0) {
    return at.Error("capture.buckets", "needs max_batch_size > 0 (buckets are batch sizes)");
  }
  return CheckSizes(at, "capture.buckets", s.capture.buckets, s.max_batch_size);
}

absl::Status CheckCapture(const inference::ModelConfig& c, const ConfigLocations& at,
                          CaptureSettings* out) {
  if (!c.has_capture()) return absl::OkStatus();
  const inference::ModelCapture& capture = c.capture();
  // Each bucket is captured on every stream (at warm-up too): a short list.
  if (capture.buckets_size() > kMaxBuckets) {
    return at.Error("capture.buckets", absl::StrCat("lists ", capture.buckets_size(),
                                                    " sizes, more than ", kMaxBuckets));
  }
  out->buckets.assign(capture.buckets().begin(), capture.buckets().end());
  if (capture.has_warmup()) out->warmup = capture.warmup();
  if (capture.has_max_instances_per_stream()) {
    const int32_t n = capture.max_instances_per_stream();
    if (n < 0 || n > (1 << 20)) {
      return at.Error("capture.max_instances_per_stream",
                      absl::StrCat("must be in [0, ", 1 << 20, "], got ", n));
    }
    out->max_instances_per_stream = n;
  }
  return absl::OkStatus();
}

// Triton's rule for ONNX models: batching is possible when every input and output of the graph
// has a variable first dimension, and the config writes no tensor with the batch dimension.
bool CanBatch(const GraphTensors& graph, const ModelSettings& s) {
  if (graph.inputs.empty()) return false;
  absl::flat_hash_map<std::string, size_t> ranks;
  for (const auto* list : {&graph.inputs, &graph.outputs}) {
    for (const GraphTensor& t : *list) {
      if (!t.has_shape || t.dims.empty() || t.dims[0] != -1) return false;
      ranks[t.name] = t.dims.size();
    }
  }
  for (const auto* list : {&s.inputs, &s.outputs}) {
    for (const TensorSettings& t : *list) {
      auto it = ranks.find(t.name);
      if (it != ranks.end() && t.dims.size() != it->second - 1) return false;
    }
  }
  return true;
}

// The graph's tensors as config entries (without the batch dimension when batching); empty
// when one of them has no shape or no known type (the backend then checks requests itself).
std::vector<TensorSettings> FromGraph(const std::vector<GraphTensor>& tensors, int max_batch) {
  std::vector<TensorSettings> out;
  for (const GraphTensor& t : tensors) {
    if (!t.has_shape || t.type == TensorType::kInvalid) return {};
    TensorSettings e;
    e.name = t.name;
    e.data_type = t.type;
    e.dims = t.dims;
    if (max_batch > 0 && !e.dims.empty()) e.dims.erase(e.dims.begin());
    out.push_back(std::move(e));
  }
  return out;
}

void Complete(const GraphTensors& graph, const ConfigLocations& at, const AutoComplete& options,
              ModelSettings* s) {
  if (s->max_batch_size == 0 && !at.Has("max_batch_size") && options.default_max_batch_size > 0 &&
      CanBatch(graph, *s)) {
    s->max_batch_size = options.default_max_batch_size;
    if (s->max_batch_size > 1 && !s->dynamic_batching.has_value()) {
      s->dynamic_batching = DynamicBatching{};
    }
  }
  if (s->inputs.empty()) s->inputs = FromGraph(graph.inputs, s->max_batch_size);
  if (s->outputs.empty()) s->outputs = FromGraph(graph.outputs, s->max_batch_size);
}

}  // namespace

absl::StatusOr<VersionPolicy> VersionPolicyFromConfig(const ParsedModelConfig& parsed) {
  VersionPolicy policy;
  RETURN_IF_ERROR(CheckVersionPolicy(parsed.config, parsed.locations, &policy));
  return policy;
}

absl::StatusOr<ModelSettings> ModelSettingsFromConfig(const ParsedModelConfig& parsed,
                                                      absl::string_view model_dir_name,
                                                      const GraphTensors* graph,
                                                      const AutoComplete& auto_complete) {
  const inference::ModelConfig& c = parsed.config;
  const ConfigLocations& at = parsed.locations;
  RETURN_IF_ERROR(RefuseUnsupported(c, "", at));
  if (!at.unknown().empty()) {
    const auto& [line, message] = at.unknown().front();
    return absl::InvalidArgumentError(
        absl::StrCat(at.source(), " line ", line, ": unknown field: ", message));
  }
  ModelSettings s;
  s.name = std::string(model_dir_name);
  if (!c.name().empty() && c.name() != model_dir_name) {
    return at.Error("name", absl::StrCat("is \"", c.name(), "\" but the model's directory is \"",
                                         model_dir_name, "\""));
  }
  if (!c.platform().empty() && c.platform() != kOnnxPlatform && c.platform() != "onnx") {
    return at.Error("platform",
                    absl::StrCat("is \"", c.platform(), "\"; Reprise serves ONNX models (",
                                 kOnnxPlatform, ", or backend ", kOnnxBackend, ")"));
  }
  if (!c.backend().empty() && c.backend() != kOnnxBackend) {
    return at.Error("backend", absl::StrCat("is \"", c.backend(),
                                            "\"; Reprise serves ONNX models (", kOnnxBackend, ")"));
  }
  if (!c.default_model_filename().empty() && c.default_model_filename() != "model.onnx") {
    return at.Error("default_model_filename",
                    absl::StrCat("is \"", c.default_model_filename(),
                                 "\"; Reprise reads <version>/model.onnx only"));
  }
  if (c.max_batch_size() < 0) {
    return at.Error("max_batch_size", absl::StrCat("must be 0 or more, got ", c.max_batch_size()));
  }
  s.max_batch_size = c.max_batch_size();
  if (c.max_queue_size() > kMaxInt) return at.Error("max_queue_size", "is too large");
  s.max_queue_size = static_cast<int>(c.max_queue_size());
  RETURN_IF_ERROR(CheckTensors(at, "input", c.input(), &s.inputs));
  RETURN_IF_ERROR(CheckTensors(at, "output", c.output(), &s.outputs));
  // Each instance is a stream with its own plans; a config (which a client's load override may
  // bring) cannot ask for more than kMaxInstances in all.
  int total_instances = 0;
  for (int i = 0; i < c.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& g = c.instance_group(i);
    const std::string path = Index("instance_group", static_cast<size_t>(i));
    // Triton's default count is 1; a count written as 0 (or negative) is a mistake.
    if (g.count() > 1024 || g.count() < 0 || (g.count() == 0 && at.Has(Join(path, "count")))) {
      return at.Error(Join(path, "count"), absl::StrCat("must be in [1, 1024], got ", g.count()));
    }
    if (!inference::ModelInstanceGroup::Kind_IsValid(g.kind())) {
      return at.Error(Join(path, "kind"), absl::StrCat("unknown kind ", g.kind()));
    }
    InstanceGroup group;
    group.count = g.count() == 0 ? 1 : g.count();
    total_instances += group.count;  // at most 1024 more than kMaxInstances: no overflow
    if (total_instances > kMaxInstances) {
      return at.Error(Join(path, "count"), absl::StrCat("the instance groups ask for more than ",
                                                        kMaxInstances, " instances in all"));
    }
    group.kind = inference::ModelInstanceGroup::Kind_Name(g.kind());
    // Triton's rule: a KIND_AUTO group that names GPUs is a KIND_GPU group.
    if (g.gpus_size() > 0 && g.kind() == inference::ModelInstanceGroup::KIND_AUTO) {
      group.kind = "KIND_GPU";
    }
    if (g.gpus_size() > 0 && group.kind != "KIND_GPU") {
      return at.Error(Join(path, "gpus"), absl::StrCat("names GPUs for a ", group.kind,
                                                       " group; only KIND_GPU "
                                                       "(or KIND_AUTO) groups run on GPUs"));
    }
    for (int gpu : g.gpus()) {
      if (gpu < 0) {
        return at.Error(Join(path, "gpus"), absl::StrCat("must be GPU indices >= 0, got ", gpu));
      }
      group.gpus.push_back(gpu);
    }
    s.instance_groups.push_back(std::move(group));
  }
  RETURN_IF_ERROR(CheckVersionPolicy(c, at, &s.version_policy));
  RETURN_IF_ERROR(CheckBatching(c, at, &s));
  RETURN_IF_ERROR(CheckCapture(c, at, &s.capture));
  if (graph != nullptr && auto_complete.enabled) Complete(*graph, at, auto_complete, &s);
  RETURN_IF_ERROR(CheckBatchSizes(at, s));
  return s;
}

absl::StatusOr<ModelSettings> ParseModelSettings(absl::string_view yaml_text,
                                                 absl::string_view source,
                                                 absl::string_view model_dir_name) {
  ASSIGN_OR_RETURN(ParsedModelConfig parsed, ParseModelConfigYaml(yaml_text, source));
  return ModelSettingsFromConfig(parsed, model_dir_name);
}

}  // namespace reprise::config
