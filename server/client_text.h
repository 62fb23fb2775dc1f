// Text a client chose (model and tensor names), as it may appear in messages and logs.
#ifndef REPRISE_SERVER_CLIENT_TEXT_H_
#define REPRISE_SERVER_CLIENT_TEXT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace reprise::server {

/// `name` in double quotes, cut to its first 64 bytes (with its length) when longer, so that an
/// error naming a client's multi-megabyte name stays small.
inline std::string QuotedName(absl::string_view name) {
  constexpr size_t kShown = 64;
  if (name.size() <= kShown) return absl::StrCat("\"", name, "\"");
  return absl::StrCat("\"", name.substr(0, kShown), "...\" (", name.size(), " bytes)");
}

}  // namespace reprise::server

#endif  // REPRISE_SERVER_CLIENT_TEXT_H_
