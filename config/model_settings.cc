#include "config/model_settings.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "config/yaml_reader.h"
#include "runtime/core/status_macros.h"

namespace reprise::config {
namespace {

constexpr std::array<std::pair<TensorType, absl::string_view>, 15> kTypeNames = {{
    {TensorType::kInvalid, "TYPE_INVALID"},
    {TensorType::kBool, "TYPE_BOOL"},
    {TensorType::kUInt8, "TYPE_UINT8"},
    {TensorType::kUInt16, "TYPE_UINT16"},
    {TensorType::kUInt32, "TYPE_UINT32"},
    {TensorType::kUInt64, "TYPE_UINT64"},
    {TensorType::kInt8, "TYPE_INT8"},
    {TensorType::kInt16, "TYPE_INT16"},
    {TensorType::kInt32, "TYPE_INT32"},
    {TensorType::kInt64, "TYPE_INT64"},
    {TensorType::kFp16, "TYPE_FP16"},
    {TensorType::kFp32, "TYPE_FP32"},
    {TensorType::kFp64, "TYPE_FP64"},
    {TensorType::kString, "TYPE_STRING"},
    {TensorType::kBf16, "TYPE_BF16"},
}};

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

absl::Status ParseTensors(const YamlReader& r, const YAML::Node& root, absl::string_view key,
                          bool is_input, std::vector<TensorSettings>* out) {
  const YAML::Node list = YamlReader::Child(root, key);
  if (!list.IsDefined() || list.IsNull()) return absl::OkStatus();
  if (!list.IsSequence()) return r.Error(list, key, "must be a list of tensors");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string path = absl::StrCat(key, "[", i, "]");
    if (is_input) {
      RETURN_IF_ERROR(r.CheckMap(item, path, {"name", "data_type", "dims"}));
    } else {
      RETURN_IF_ERROR(r.CheckMap(item, path, {"name", "data_type", "dims", "label_filename"}));
    }
    if (!item.IsMap()) return r.Error(item, path, "must be a mapping");
    TensorSettings t;
    RETURN_IF_ERROR(r.ReadString(item, path, "name", &t.name));
    if (t.name.empty()) return r.Error(item, path, "needs a non-empty \"name\"");
    std::string type_name;
    RETURN_IF_ERROR(r.ReadString(item, path, "data_type", &type_name));
    const YAML::Node type_node = YamlReader::Child(item, "data_type");
    if (type_name.empty()) return r.Error(item, path, "needs a \"data_type\" (e.g. TYPE_FP32)");
    absl::StatusOr<TensorType> type = TensorTypeFromName(type_name);
    if (!type.ok() || *type == TensorType::kInvalid) {
      return r.Error(type_node, YamlReader::Join(path, "data_type"),
                     absl::StrCat("unknown data type \"", type_name, "\""));
    }
    t.data_type = *type;
    if (!YamlReader::Child(item, "dims").IsDefined()) {
      return r.Error(item, path, "needs \"dims\" (a list; -1 for a variable dimension)");
    }
    RETURN_IF_ERROR(r.ReadIntList(item, path, "dims", -1, kMaxInt, &t.dims));
    if (t.dims.empty()) {
      return r.Error(YamlReader::Child(item, "dims"), YamlReader::Join(path, "dims"),
                     "rank must be at least 1");
    }
    if (!is_input) {
      RETURN_IF_ERROR(r.ReadString(item, path, "label_filename", &t.label_filename));
    }
    for (const TensorSettings& other : *out) {
      if (other.name == t.name) {
        return r.Error(
            item, path,
            absl::StrCat(is_input ? "input" : "output", " \"", t.name, "\" is declared twice"));
      }
    }
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status ParseVersionPolicy(const YamlReader& r, const YAML::Node& root, VersionPolicy* p) {
  const YAML::Node node = YamlReader::Child(root, "version_policy");
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckMap(node, "version_policy", {"latest", "all", "specific"}));
  if (node.size() != 1) {
    return r.Error(node, "version_policy", "must have exactly one of latest, all, specific");
  }
  if (YAML::Node latest = YamlReader::Child(node, "latest"); latest.IsDefined()) {
    RETURN_IF_ERROR(r.CheckMap(latest, "version_policy.latest", {"num_versions"}));
    p->kind = VersionPolicy::Kind::kLatest;
    int64_t n = 1;
    RETURN_IF_ERROR(r.ReadInt(latest, "version_policy.latest", "num_versions", 1, 1024, &n));
    p->num_versions = static_cast<int>(n);
  } else if (YAML::Node all = YamlReader::Child(node, "all"); all.IsDefined()) {
    RETURN_IF_ERROR(r.CheckMap(all, "version_policy.all", {}));
    p->kind = VersionPolicy::Kind::kAll;
  } else {
    const YAML::Node specific = YamlReader::Child(node, "specific");
    RETURN_IF_ERROR(r.CheckMap(specific, "version_policy.specific", {"versions"}));
    p->kind = VersionPolicy::Kind::kSpecific;
    RETURN_IF_ERROR(r.ReadIntList(specific, "version_policy.specific", "versions", 1,
                                  std::numeric_limits<int64_t>::max(), &p->versions));
    if (p->versions.empty()) {
      return r.Error(specific, "version_policy.specific.versions", "must list a version");
    }
  }
  return absl::OkStatus();
}

// A list of batch sizes: each 1 ... max_batch_size (when > 0), strictly ascending.
absl::Status CheckSizes(const YamlReader& r, const YAML::Node& node, absl::string_view path,
                        const std::vector<int64_t>& sizes, int max_batch_size) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (max_batch_size > 0 && sizes[i] > max_batch_size) {
      return r.Error(node, path,
                     absl::StrCat(sizes[i], " exceeds max_batch_size ", max_batch_size));
    }
    if (i > 0 && sizes[i] <= sizes[i - 1]) {
      return r.Error(node, path,
                     absl::StrCat("must be ascending without repeats (", sizes[i - 1], " then ",
                                  sizes[i], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseBatching(const YamlReader& r, const YAML::Node& root, ModelSettings* s) {
  const YAML::Node batching = YamlReader::Child(root, "dynamic_batching");
  if (!batching.IsDefined()) return absl::OkStatus();
  const std::string path = "dynamic_batching";
  RETURN_IF_ERROR(
      r.CheckMap(batching, path,
                 {"preferred_batch_size", "max_queue_delay_microseconds", "priority_levels",
                  "default_priority_level", "default_queue_policy"}));
  DynamicBatching b;
  RETURN_IF_ERROR(
      r.ReadIntList(batching, path, "preferred_batch_size", 1, kMaxInt, &b.preferred_batch_size));
  RETURN_IF_ERROR(CheckSizes(r, YamlReader::Child(batching, "preferred_batch_size"),
                             "dynamic_batching.preferred_batch_size", b.preferred_batch_size,
                             s->max_batch_size));
  if (YamlReader::Child(batching, "max_queue_delay_microseconds").IsDefined()) {
    int64_t delay = 0;
    RETURN_IF_ERROR(r.ReadInt(batching, path, "max_queue_delay_microseconds", 0,
                              std::numeric_limits<int64_t>::max() / 1000, &delay));
    b.max_queue_delay_microseconds = delay;
  }
  int64_t levels = 0;
  RETURN_IF_ERROR(r.ReadInt(batching, path, "priority_levels", 0, 1024, &levels));
  b.priority_levels = static_cast<int>(levels);
  int64_t level = 0;
  RETURN_IF_ERROR(r.ReadInt(batching, path, "default_priority_level", 0, 1024, &level));
  if (level > std::max<int64_t>(levels, 1)) {
    return r.Error(YamlReader::Child(batching, "default_priority_level"),
                   "dynamic_batching.default_priority_level",
                   absl::StrCat(level, " exceeds priority_levels ", levels));
  }
  b.default_priority_level = static_cast<int>(level);
  const YAML::Node policy = YamlReader::Child(batching, "default_queue_policy");
  if (policy.IsDefined() && !policy.IsNull()) {
    const std::string ppath = "dynamic_batching.default_queue_policy";
    RETURN_IF_ERROR(r.CheckMap(policy, ppath, {"max_queue_size", "default_timeout_microseconds"}));
    int64_t size = 0;
    RETURN_IF_ERROR(r.ReadInt(policy, ppath, "max_queue_size", 0, kMaxInt, &size));
    b.default_queue_policy.max_queue_size = static_cast<int>(size);
    RETURN_IF_ERROR(r.ReadInt(policy, ppath, "default_timeout_microseconds", 0,
                              std::numeric_limits<int64_t>::max() / 1000,
                              &b.default_queue_policy.default_timeout_microseconds));
  }
  s->dynamic_batching = std::move(b);
  return absl::OkStatus();
}

absl::Status ParseCapture(const YamlReader& r, const YAML::Node& root, ModelSettings* s) {
  const YAML::Node capture = YamlReader::Child(root, "capture");
  if (!capture.IsDefined() || capture.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(
      r.CheckMap(capture, "capture", {"buckets", "warmup", "max_instances_per_stream"}));
  CaptureSettings c;
  RETURN_IF_ERROR(r.ReadIntList(capture, "capture", "buckets", 1, kMaxInt, &c.buckets));
  if (!c.buckets.empty() && s->max_batch_size == 0) {
    return r.Error(YamlReader::Child(capture, "buckets"), "capture.buckets",
                   "needs max_batch_size > 0 (buckets are batch sizes)");
  }
  RETURN_IF_ERROR(CheckSizes(r, YamlReader::Child(capture, "buckets"), "capture.buckets", c.buckets,
                             s->max_batch_size));
  if (YamlReader::Child(capture, "warmup").IsDefined()) {
    bool warmup = false;
    RETURN_IF_ERROR(r.ReadBool(capture, "capture", "warmup", &warmup));
    c.warmup = warmup;
  }
  if (YamlReader::Child(capture, "max_instances_per_stream").IsDefined()) {
    int64_t n = 0;
    RETURN_IF_ERROR(r.ReadInt(capture, "capture", "max_instances_per_stream", 0, 1 << 20, &n));
    c.max_instances_per_stream = static_cast<int>(n);
  }
  s->capture = std::move(c);
  return absl::OkStatus();
}

absl::Status ParseInto(const YamlReader& r, const YAML::Node& root,
                       absl::string_view model_dir_name, ModelSettings* s) {
  RETURN_IF_ERROR(
      r.CheckMap(root, "",
                 {"name", "platform", "max_batch_size", "max_queue_size", "input", "output",
                  "instance_group", "version_policy", "dynamic_batching", "capture"}));
  RETURN_IF_ERROR(r.ReadString(root, "", "name", &s->name));
  if (s->name != model_dir_name) {
    return r.Error(
        YamlReader::Child(root, "name"), "name",
        absl::StrCat("is \"", s->name, "\" but the model's directory is \"", model_dir_name, "\""));
  }
  RETURN_IF_ERROR(r.ReadString(root, "", "platform", &s->platform));
  int64_t max_batch = s->max_batch_size;
  RETURN_IF_ERROR(r.ReadInt(root, "", "max_batch_size", 0, kMaxInt, &max_batch));
  s->max_batch_size = static_cast<int>(max_batch);
  int64_t max_queue = s->max_queue_size;
  RETURN_IF_ERROR(r.ReadInt(root, "", "max_queue_size", 0, kMaxInt, &max_queue));
  s->max_queue_size = static_cast<int>(max_queue);
  RETURN_IF_ERROR(ParseTensors(r, root, "input", /*is_input=*/true, &s->inputs));
  RETURN_IF_ERROR(ParseTensors(r, root, "output", /*is_input=*/false, &s->outputs));

  const YAML::Node groups = YamlReader::Child(root, "instance_group");
  if (groups.IsDefined() && !groups.IsNull()) {
    if (!groups.IsSequence()) return r.Error(groups, "instance_group", "must be a list");
    for (size_t i = 0; i < groups.size(); ++i) {
      const YAML::Node item = groups[i];
      const std::string path = absl::StrCat("instance_group[", i, "]");
      RETURN_IF_ERROR(r.CheckMap(item, path, {"count", "kind"}));
      InstanceGroup g;
      int64_t count = g.count;
      RETURN_IF_ERROR(r.ReadInt(item, path, "count", 1, 1024, &count));
      g.count = static_cast<int>(count);
      RETURN_IF_ERROR(r.ReadEnum(item, path, "kind",
                                 {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"}, &g.kind));
      s->instance_groups.push_back(std::move(g));
    }
  }

  RETURN_IF_ERROR(ParseVersionPolicy(r, root, &s->version_policy));

  RETURN_IF_ERROR(ParseBatching(r, root, s));
  RETURN_IF_ERROR(ParseCapture(r, root, s));
  return absl::OkStatus();
}

}  // namespace

absl::string_view TensorTypeName(TensorType type) {
  for (const auto& [t, name] : kTypeNames) {
    if (t == type) return name;
  }
  return "TYPE_INVALID";
}

absl::StatusOr<TensorType> TensorTypeFromName(absl::string_view name) {
  for (const auto& [t, n] : kTypeNames) {
    if (n == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data type \"", name, "\""));
}

std::vector<int64_t> CaptureBuckets(const ModelSettings& settings) {
  if (settings.max_batch_size <= 0) return {};
  if (!settings.capture.buckets.empty()) return settings.capture.buckets;
  std::vector<int64_t> buckets;
  for (int64_t b = 1; b < settings.max_batch_size; b *= 2) buckets.push_back(b);
  buckets.push_back(settings.max_batch_size);
  return buckets;
}

absl::StatusOr<ModelSettings> ParseModelSettings(absl::string_view yaml_text,
                                                 absl::string_view source,
                                                 absl::string_view model_dir_name) {
  YamlReader reader{std::string(source)};
  ASSIGN_OR_RETURN(YAML::Node root, reader.Parse(yaml_text));
  ModelSettings settings;
  settings.name = std::string(model_dir_name);
  try {
    RETURN_IF_ERROR(ParseInto(reader, root, model_dir_name, &settings));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, " line ", e.mark.line + 1, ": ", e.msg));
  }
  return settings;
}

}  // namespace reprise::config
