// Text a client chose (model and tensor names), as it may appear in messages and logs.
#ifndef REPRISE_SERVER_CLIENT_TEXT_H_
#define REPRISE_SERVER_CLIENT_TEXT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace reprise::server {

/// `name` in double quotes (or `quote`), cut to its first 64 bytes (with its length) when
/// longer, so that an error naming a client's multi-megabyte name stays small.
inline std::string QuotedName(absl::string_view name, char quote = '"') {
  constexpr size_t kShown = 64;
  const absl::string_view q(&quote, 1);
  if (name.size() <= kShown) return absl::StrCat(q, name, q);
  return absl::StrCat(q, name.substr(0, kShown), "...", q, " (", name.size(), " bytes)");
}

}  // namespace reprise::server

#endif  // REPRISE_SERVER_CLIENT_TEXT_H_
