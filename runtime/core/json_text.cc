#include "runtime/core/json_text.h"

#include <cstdint>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace reprise::runtime {

std::string JsonQuote(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(c);  // UTF-8 passes through unchanged
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string JsonPointer(const void* ptr) {
  return absl::StrFormat("\"0x%x\"", reinterpret_cast<uintptr_t>(ptr));
}

}  // namespace reprise::runtime
