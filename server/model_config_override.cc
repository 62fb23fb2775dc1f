#include "server/model_config_override.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/yaml.h"

namespace reprise::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// INVALID_ARGUMENT naming the first field of `message` that is set and not in `allowed`.
absl::Status CheckFields(const Message& message, const std::set<std::string>& allowed,
                         absl::string_view path, absl::string_view source) {
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const FieldDescriptor* f : fields) {
    if (!allowed.contains(f->name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": field \"", path, path.empty() ? "" : ".", f->name(),
                       "\" is not supported by reprise (see docs/triton-migration.md)"));
    }
  }
  return absl::OkStatus();
}

YAML::Node Dims(const google::protobuf::RepeatedField<int64_t>& dims) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (int64_t d : dims) list.push_back(d);
  return list;
}

template <typename Tensor>
absl::StatusOr<YAML::Node> TensorNode(const Tensor& t, const std::set<std::string>& allowed,
                                      absl::string_view path, absl::string_view source) {
  if (absl::Status s = CheckFields(t, allowed, path, source); !s.ok()) return s;
  YAML::Node node(YAML::NodeType::Map);
  node["name"] = t.name();
  node["data_type"] = inference::DataType_Name(t.data_type());
  node["dims"] = Dims(t.dims());
  return node;
}

}  // namespace

absl::StatusOr<config::ModelSettings> ModelSettingsFromProto(const inference::ModelConfig& proto,
                                                             absl::string_view source,
                                                             absl::string_view model_name) {
  if (absl::Status s =
          CheckFields(proto,
                      {"name", "platform", "backend", "max_batch_size", "input", "output",
                       "instance_group", "version_policy", "dynamic_batching"},
                      "", source);
      !s.ok()) {
    return s;
  }
  YAML::Node root(YAML::NodeType::Map);
  if (!proto.name().empty()) root["name"] = proto.name();
  if (!proto.platform().empty()) {
    root["platform"] = proto.platform();
  } else if (!proto.backend().empty()) {
    root["platform"] = proto.backend();
  }
  root["max_batch_size"] = proto.max_batch_size();
  for (int i = 0; i < proto.input_size(); ++i) {
    absl::StatusOr<YAML::Node> node = TensorNode(proto.input(i), {"name", "data_type", "dims"},
                                                 absl::StrCat("input[", i, "]"), source);
    if (!node.ok()) return node.status();
    root["input"].push_back(*node);
  }
  for (int i = 0; i < proto.output_size(); ++i) {
    const inference::ModelOutput& out = proto.output(i);
    absl::StatusOr<YAML::Node> node =
        TensorNode(out, {"name", "data_type", "dims", "label_filename"},
                   absl::StrCat("output[", i, "]"), source);
    if (!node.ok()) return node.status();
    if (!out.label_filename().empty()) (*node)["label_filename"] = out.label_filename();
    root["output"].push_back(*node);
  }
  for (int i = 0; i < proto.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& g = proto.instance_group(i);
    if (absl::Status s = CheckFields(g, {"name", "count", "kind"},
                                     absl::StrCat("instance_group[", i, "]"), source);
        !s.ok()) {
      return s;
    }
    YAML::Node node(YAML::NodeType::Map);
    if (g.count() != 0) node["count"] = g.count();
    node["kind"] = inference::ModelInstanceGroup::Kind_Name(g.kind());
    root["instance_group"].push_back(node);
  }
  if (proto.has_version_policy()) {
    const inference::ModelVersionPolicy& p = proto.version_policy();
    YAML::Node node(YAML::NodeType::Map);
    if (p.has_all()) {
      node["all"] = YAML::Node(YAML::NodeType::Map);
    } else if (p.has_specific()) {
      YAML::Node versions(YAML::NodeType::Sequence);
      for (int64_t v : p.specific().versions()) versions.push_back(v);
      node["specific"]["versions"] = versions;
    } else {
      YAML::Node latest(YAML::NodeType::Map);
      if (p.latest().num_versions() != 0) latest["num_versions"] = p.latest().num_versions();
      node["latest"] = latest;
    }
    root["version_policy"] = node;
  }
  if (proto.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& b = proto.dynamic_batching();
    if (absl::Status s =
            CheckFields(b,
                        {"preferred_batch_size", "max_queue_delay_microseconds", "priority_levels",
                         "default_priority_level", "default_queue_policy"},
                        "dynamic_batching", source);
        !s.ok()) {
      return s;
    }
    YAML::Node node(YAML::NodeType::Map);
    if (b.preferred_batch_size_size() > 0) {
      YAML::Node sizes(YAML::NodeType::Sequence);
      for (int32_t size : b.preferred_batch_size()) sizes.push_back(size);
      node["preferred_batch_size"] = sizes;
    }
    if (b.max_queue_delay_microseconds() != 0) {
      node["max_queue_delay_microseconds"] = b.max_queue_delay_microseconds();
    }
    node["priority_levels"] = b.priority_levels();
    node["default_priority_level"] = b.default_priority_level();
    if (b.has_default_queue_policy()) {
      const inference::ModelQueuePolicy& q = b.default_queue_policy();
      // allow_timeout_override is what reprise does anyway (ModelConfig reports it true).
      if (absl::Status s = CheckFields(
              q, {"max_queue_size", "default_timeout_microseconds", "allow_timeout_override"},
              "dynamic_batching.default_queue_policy", source);
          !s.ok()) {
        return s;
      }
      node["default_queue_policy"]["max_queue_size"] = q.max_queue_size();
      node["default_queue_policy"]["default_timeout_microseconds"] =
          q.default_timeout_microseconds();
    }
    root["dynamic_batching"] = node;
  }
  YAML::Emitter emitter;
  emitter << root;
  return config::ParseModelSettings(emitter.c_str(), source, model_name);
}

absl::StatusOr<config::ModelSettings> ParseConfigOverride(absl::string_view json,
                                                          absl::string_view model_name) {
  const std::string source = "config override";
  inference::ModelConfig proto;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(json), &proto, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a JSON ModelConfig: ", status.ToString()));
  }
  return ModelSettingsFromProto(proto, source, model_name);
}

}  // namespace reprise::server
