// JSON helpers of the HTTP endpoint (RapidJSON): bounded parsing and protobuf messages as JSON.
#ifndef REPRISE_SERVER_HTTP_JSON_H_
#define REPRISE_SERVER_HTTP_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "rapidjson/document.h"

namespace reprise::server {

/// Deepest nesting a parsed document may have (objects and arrays). Parsing is iterative and
/// refuses deeper text, so neither the parser nor the document's destructor recurses further.
inline constexpr int kMaxJsonDepth = 96;

/// Parses `text` into `*doc`; INVALID_ARGUMENT with the offset and RapidJSON's reason for
/// malformed JSON, or for nesting deeper than kMaxJsonDepth. `what` names the text.
absl::Status ParseJson(absl::string_view text, absl::string_view what, rapidjson::Document* doc);

/// `message` as JSON with the proto field names: every scalar field (defaults included),
/// sub-messages that are set, 64-bit integers as numbers (as Triton's REST endpoint), enums by
/// name, bytes as base64, maps as objects.
std::string ProtoToJson(const google::protobuf::Message& message);

/// The JSON type of `v` in words ("an object", "a string", ...) for messages.
absl::string_view JsonTypeName(const rapidjson::Value& v);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_HTTP_JSON_H_
