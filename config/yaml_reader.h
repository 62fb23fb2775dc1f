// Checked reading of YAML documents for Reprise's configuration files: every error names the
// file, the line and the key. Internal to config/ (it exposes yaml-cpp types).
#ifndef REPRISE_CONFIG_YAML_READER_H_
#define REPRISE_CONFIG_YAML_READER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace reprise::config {

/// Reads values out of one parsed YAML document. `source` names the document in messages
/// (usually its path). Keys are given as dotted paths ("server.grpc_port") in messages.
/// Not thread-safe; cheap to construct.
class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  /// Parses `text`; a syntax error names the line. yaml-cpp exceptions do not escape.
  absl::StatusOr<YAML::Node> Parse(absl::string_view text) const;

  /// `node` must be a mapping (or null / absent, read as empty) whose keys are all in
  /// `allowed`; an unknown key is an error naming it and its line.
  absl::Status CheckMap(const YAML::Node& node, absl::string_view path,
                        std::initializer_list<absl::string_view> allowed) const;

  /// Each Read* leaves `*out` unchanged when `key` is absent from the mapping `map` (so the
  /// caller's default stands) and fails when the value has the wrong type or range.
  absl::Status ReadInt(const YAML::Node& map, absl::string_view path, absl::string_view key,
                       int64_t min, int64_t max, int64_t* out) const;
  absl::Status ReadBool(const YAML::Node& map, absl::string_view path, absl::string_view key,
                        bool* out) const;
  absl::Status ReadString(const YAML::Node& map, absl::string_view path, absl::string_view key,
                          std::string* out) const;
  /// A string that must be one of `choices`.
  absl::Status ReadEnum(const YAML::Node& map, absl::string_view path, absl::string_view key,
                        std::initializer_list<absl::string_view> choices, std::string* out) const;
  /// A sequence of strings; a single string is accepted as a one-element list.
  absl::Status ReadStringList(const YAML::Node& map, absl::string_view path, absl::string_view key,
                              std::vector<std::string>* out) const;
  absl::Status ReadIntList(const YAML::Node& map, absl::string_view path, absl::string_view key,
                           int64_t min, int64_t max, std::vector<int64_t>* out) const;

  /// An INVALID_ARGUMENT error `<source> line N: key "<path>": <what>` at `node`'s line.
  absl::Status Error(const YAML::Node& node, absl::string_view path, absl::string_view what) const;

  /// The value under `key` when `map` is a mapping that has it, else an undefined node.
  static YAML::Node Child(const YAML::Node& map, absl::string_view key);
  /// "a.b" from "a" and "b" (just "b" when `path` is empty).
  static std::string Join(absl::string_view path, absl::string_view key);

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace reprise::config

#endif  // REPRISE_CONFIG_YAML_READER_H_
