// A loaded model: imported, optimised, immutable; plans are made from it per input shape.
#ifndef REPRISE_RUNTIME_ENGINE_MODEL_H_
#define REPRISE_RUNTIME_ENGINE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

struct ModelOptions {
  int intra_op_threads = 1;  // passed to kernels at Prepare
};

/// Statistics of the load-time passes.
struct LoadStats {
  int imported_nodes = 0;  // nodes in the file (Constant nodes included)
  int nodes = 0;           // nodes left after optimisation
  int constants = 0;       // constant tensors after folding
};

/// A model loaded once and never changed afterwards.
///
/// Thread-safety: every method is const and may be called from several threads at once.
/// Lifetime: the model borrows `registry`, which must outlive it; plans borrow the model.
class Model {
 public:
  /// Imports (see onnx_import.h) and optimises (see optimizer.h) an ONNX file.
  static absl::StatusOr<std::shared_ptr<const Model>> LoadFile(const std::string& path,
                                                               const KernelRegistry& registry,
                                                               const ModelOptions& options = {});
  /// The same from bytes (external data is then an error).
  static absl::StatusOr<std::shared_ptr<const Model>> LoadBytes(absl::string_view bytes,
                                                                const KernelRegistry& registry,
                                                                const ModelOptions& options = {});
  /// Optimises an already built graph (tests, other front ends).
  static absl::StatusOr<std::shared_ptr<const Model>> FromGraph(Graph graph,
                                                                const KernelRegistry& registry,
                                                                const ModelOptions& options = {});

  const Graph& graph() const { return graph_; }
  const LoadStats& stats() const { return stats_; }
  /// The graph inputs (name, element type, declared dims) in order.
  std::vector<Value> inputs() const;
  std::vector<Value> outputs() const;

  /// Orders `inputs` by the graph's inputs. Errors name the input: missing, unknown (extra),
  /// given twice, of another element type, or of a shape the model cannot take (rank or a fixed
  /// dim differs), with the expected and the given.
  absl::StatusOr<std::vector<const TensorValue*>> MatchInputs(
      const std::vector<NamedTensor>& inputs) const;

  /// Plans for one shape per graph input (in graph order).
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> Plan(const std::vector<Shape>& input_shapes) const;

 private:
  Model(Graph graph, const KernelRegistry& registry, ModelOptions options, LoadStats stats)
      : graph_(std::move(graph)), registry_(registry), options_(options), stats_(stats) {}

  Graph graph_;
  const KernelRegistry& registry_;
  ModelOptions options_;
  LoadStats stats_;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_MODEL_H_
