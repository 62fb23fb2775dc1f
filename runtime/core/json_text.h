// JSON text helpers shared by the instance dumps (every backend) and the JSON log format.
#ifndef REPRISE_RUNTIME_CORE_JSON_TEXT_H_
#define REPRISE_RUNTIME_CORE_JSON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace reprise::runtime {

/// `text` as a JSON string literal, quotes included: `"` and `\` escaped, \n \r \t by name,
/// other control characters as \u00XX; everything else (UTF-8 included) unchanged.
std::string JsonQuote(absl::string_view text);

/// A pointer as a JSON string, e.g. "0x7f12a0c0".
std::string JsonPointer(const void* ptr);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_JSON_TEXT_H_
