// ONNX import: bytes or a file → checked, shape-inferred ModelProto → the engine's Graph.
#ifndef REPRISE_RUNTIME_ENGINE_ONNX_IMPORT_H_
#define REPRISE_RUNTIME_ENGINE_ONNX_IMPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// Opsets of the default ONNX domain that the engine accepts. Below kLegacyOpset only the ops
/// whose form has not changed since opset 1 are accepted (onnx_import.cc, HasLegacyForm).
inline constexpr int kMinOpset = 1;
inline constexpr int kLegacyOpset = 7;
inline constexpr int kMaxOpset = 17;

/// True for ops the engine implements itself, without a kernel: Constant (becomes a constant),
/// Identity and Dropout (removed for inference), If and Loop (planned with their subgraphs,
/// control_flow.h).
bool IsEngineOp(absl::string_view op);

/// Parses, checks (onnx::checker), infers shapes (onnx::shape_inference) and converts an ONNX
/// model. Every op must be registered in `registry` or be an engine op, else UNIMPLEMENTED
/// listing every unsupported op. `base_dir` resolves external data (empty: external data is an
/// error). Nothing throws; libonnx's exceptions become INVALID_ARGUMENT naming the problem.
absl::StatusOr<Graph> ImportOnnxBytes(absl::string_view bytes, const KernelRegistry& registry,
                                      const std::string& base_dir = "");

/// Reads `path` and imports it; external data is looked up next to the file.
absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const KernelRegistry& registry);

/// Op types of `bytes`' main graph that are neither registered nor engine ops, sorted and
/// unique (ops of other domains are reported as "domain:Op"). For tools that sort test cases.
absl::StatusOr<std::vector<std::string>> UnsupportedOps(absl::string_view bytes,
                                                        const KernelRegistry& registry);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_ONNX_IMPORT_H_
