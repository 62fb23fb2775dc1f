#include "config/yaml_reader.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reprise::config {
namespace {

std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("\"", node.Scalar(), "\"");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

}  // namespace

absl::StatusOr<YAML::Node> YamlReader::Parse(absl::string_view text) const {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, " line ", e.mark.line + 1, ": yaml syntax error: ", e.msg));
  }
}

std::string YamlReader::Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

YAML::Node YamlReader::Child(const YAML::Node& map, absl::string_view key) {
  if (!map.IsDefined() || !map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

absl::Status YamlReader::Error(const YAML::Node& node, absl::string_view path,
                               absl::string_view what) const {
  const int line = node.IsDefined() ? node.Mark().line + 1 : 0;
  if (line <= 0)
    return absl::InvalidArgumentError(absl::StrCat(source_, ": key \"", path, "\": ", what));
  return absl::InvalidArgumentError(
      absl::StrCat(source_, " line ", line, ": key \"", path, "\": ", what));
}

absl::Status YamlReader::CheckMap(const YAML::Node& node, absl::string_view path,
                                  std::initializer_list<absl::string_view> allowed) const {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) {
    return Error(node, path.empty() ? "<top>" : path,
                 absl::StrCat("must be a mapping, got ", Describe(node)));
  }
  for (const auto& kv : node) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) return Error(key, path, "keys must be plain strings");
    bool known = false;
    for (absl::string_view a : allowed) known = known || key.Scalar() == a;
    if (!known) {
      const int line = key.Mark().line + 1;
      return absl::InvalidArgumentError(
          absl::StrCat(source_, " line ", line, ": unknown key \"", Join(path, key.Scalar()),
                       "\" (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status YamlReader::ReadInt(const YAML::Node& map, absl::string_view path,
                                 absl::string_view key, int64_t min, int64_t max,
                                 int64_t* out) const {
  YAML::Node node = Child(map, key);
  if (!node.IsDefined()) return absl::OkStatus();
  const std::string full = Join(path, key);
  int64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value)) {
    return Error(node, full, absl::StrCat("must be an integer, got ", Describe(node)));
  }
  if (value < min || value > max) {
    return Error(node, full, absl::StrCat("must be in [", min, ", ", max, "], got ", value));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status YamlReader::ReadBool(const YAML::Node& map, absl::string_view path,
                                  absl::string_view key, bool* out) const {
  YAML::Node node = Child(map, key);
  if (!node.IsDefined()) return absl::OkStatus();
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return Error(node, Join(path, key),
                 absl::StrCat("must be true or false, got ", Describe(node)));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status YamlReader::ReadString(const YAML::Node& map, absl::string_view path,
                                    absl::string_view key, std::string* out) const {
  YAML::Node node = Child(map, key);
  if (!node.IsDefined()) return absl::OkStatus();
  if (!node.IsScalar()) {
    return Error(node, Join(path, key), absl::StrCat("must be a string, got ", Describe(node)));
  }
  *out = node.Scalar();
  return absl::OkStatus();
}

absl::Status YamlReader::ReadEnum(const YAML::Node& map, absl::string_view path,
                                  absl::string_view key,
                                  std::initializer_list<absl::string_view> choices,
                                  std::string* out) const {
  std::string value = *out;
  absl::Status status = ReadString(map, path, key, &value);
  if (!status.ok()) return status;
  for (absl::string_view c : choices) {
    if (value == c) {
      *out = value;
      return absl::OkStatus();
    }
  }
  return Error(
      Child(map, key), Join(path, key),
      absl::StrCat("must be one of ", absl::StrJoin(choices, ", "), ", got \"", value, "\""));
}

absl::Status YamlReader::ReadStringList(const YAML::Node& map, absl::string_view path,
                                        absl::string_view key,
                                        std::vector<std::string>* out) const {
  YAML::Node node = Child(map, key);
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  const std::string full = Join(path, key);
  if (node.IsScalar()) {
    *out = {node.Scalar()};
    return absl::OkStatus();
  }
  if (!node.IsSequence()) {
    return Error(node, full, absl::StrCat("must be a list of strings, got ", Describe(node)));
  }
  std::vector<std::string> values;
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      return Error(item, full, absl::StrCat("items must be strings, got ", Describe(item)));
    }
    values.push_back(item.Scalar());
  }
  *out = std::move(values);
  return absl::OkStatus();
}

absl::Status YamlReader::ReadIntList(const YAML::Node& map, absl::string_view path,
                                     absl::string_view key, int64_t min, int64_t max,
                                     std::vector<int64_t>* out) const {
  YAML::Node node = Child(map, key);
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  const std::string full = Join(path, key);
  if (!node.IsSequence()) {
    return Error(node, full, absl::StrCat("must be a list of integers, got ", Describe(node)));
  }
  std::vector<int64_t> values;
  for (const auto& item : node) {
    int64_t value = 0;
    if (!item.IsScalar() || !YAML::convert<int64_t>::decode(item, value)) {
      return Error(item, full, absl::StrCat("items must be integers, got ", Describe(item)));
    }
    if (value < min || value > max) {
      return Error(item, full,
                   absl::StrCat("items must be in [", min, ", ", max, "], got ", value));
    }
    values.push_back(value);
  }
  *out = std::move(values);
  return absl::OkStatus();
}

}  // namespace reprise::config
