// The KServe v2 protocol's datatype names: the one mapping the server, its codecs and the
// tools (CLI, benchmarks) share. Its own small library (reprise_protocol), so that a client
// links no server.
#ifndef REPRISE_SERVER_KSERVE_TYPES_H_
#define REPRISE_SERVER_KSERVE_TYPES_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"

namespace reprise::server {

/// KServe datatype name ("FP32", "BYTES", ...) of `type`; "" for a type KServe lacks.
absl::string_view KServeDatatypeName(runtime::DataType type);
/// The type a KServe datatype name denotes; INVALID_ARGUMENT for an unknown name.
absl::StatusOr<runtime::DataType> DataTypeFromKServe(absl::string_view name);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_KSERVE_TYPES_H_
