// Internal to config/model_config*.cc: field paths as messages name them ("input[0].dims") and
// the placeholder messages of features Reprise refuses.
#ifndef REPRISE_CONFIG_MODEL_CONFIG_PATHS_H_
#define REPRISE_CONFIG_MODEL_CONFIG_PATHS_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace reprise::config::internal {

/// "path.key", or "key" at the top level.
inline std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

/// "path[i]".
inline std::string Index(absl::string_view path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

/// A message type declared without fields (proto/model_config.proto): a feature Reprise
/// refuses, whose contents are not read. (ModelVersionPolicy.All has no fields by design.)
inline bool IsPlaceholder(const google::protobuf::Descriptor* d) {
  return d->field_count() == 0 && d->full_name() != "inference.ModelVersionPolicy.All";
}

}  // namespace reprise::config::internal

#endif  // REPRISE_CONFIG_MODEL_CONFIG_PATHS_H_
