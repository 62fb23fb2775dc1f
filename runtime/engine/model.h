// A loaded model: imported, optimised, immutable; plans are made from it per input shape.
#ifndef REPRISE_RUNTIME_ENGINE_MODEL_H_
#define REPRISE_RUNTIME_ENGINE_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/graph.h"
#include "runtime/engine/optimizer.h"
#include "runtime/engine/validated_inputs.h"
#include "runtime/engine/value_split.h"

namespace reprise::runtime::engine {

struct ModelOptions {
  int intra_op_threads = 1;  // passed to kernels at Prepare
  /// Streams a replay may fork a plan's independent branches onto (PlanOptions::
  /// max_branch_streams): 1 (the default) never; 0 as many as intra_op_threads, at most
  /// kMaxBranchStreams; more is cut to intra_op_threads (lanes share the threads). Off by
  /// default: at two threads, batch 1, it won about 4 % on GoogLeNet and lost 1-2 % on
  /// Inception v3 and a few percent on Swin-T and a sequence-to-sequence transformer
  /// (docs/benchmarks.md, "Inception branches on parallel streams" and later sections).
  int max_branch_streams = 1;
  int64_t max_plan_bytes = 0;  // PlanOptions::max_plan_bytes of every plan; 0: no cap
  /// Constant folding at load computes a node only when its outputs and workspace take at
  /// most this many bytes (a model file can declare any size); larger ones run with the plan.
  int64_t max_folded_bytes = kDefaultMaxFoldedBytes;
  /// A model with nodes whose output sizes follow values (NonZero, NonMaxSuppression, ...) is
  /// also cut in two at them (Model::value_split): a stream session replays the part in front
  /// of them and plans only the rest per input. False keeps the whole graph planned per input.
  bool split_at_value_dependent_nodes = true;
};

/// Statistics of the load-time passes.
struct LoadStats {
  int imported_nodes = 0;  // nodes in the file (Constant nodes included)
  int nodes = 0;           // nodes left after optimisation
  int constants = 0;       // constant tensors after folding
};

class Model;

/// The two parts of a model cut at its value-dependent nodes (value_split.h; Model::value_split),
/// each a model of its own with the same options and shared constants: `prefix` takes the model's
/// inputs and plans from shapes; `tail` (keyed by all values) takes the prefix's first `frontier`
/// outputs, then the model's inputs `tail_graph_inputs`. `outputs` says where each of the
/// model's outputs is.
struct SplitModels {
  std::shared_ptr<const Model> prefix;
  std::shared_ptr<const Model> tail;
  size_t frontier = 0;
  std::vector<size_t> tail_graph_inputs;
  std::vector<ValueSplit::Source> outputs;
};

/// A model loaded once and never changed afterwards.
///
/// Thread-safety: every method is const and may be called from several threads at once.
/// Lifetime: the model borrows `registry`, which must outlive it; plans borrow the model.
class Model {
 public:
  /// Imports (see onnx_import.h) and optimises (see optimizer.h) an ONNX file. A model file is
  /// outside data: whatever it holds, a load returns a status (an allocation failure on the
  /// way is RESOURCE_EXHAUSTED, any other exception INTERNAL) and touches nothing else.
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

  /// MatchInputs, as views of `inputs` (which must outlive the result and the runs given it).
  absl::StatusOr<ValidatedInputs> Validate(const std::vector<NamedTensor>& inputs) const;
  /// Wraps views that the caller checked against inputs() itself (in graph order, element types,
  /// ranks and fixed dims as declared, pieces no larger than their shapes; e.g. the server's
  /// codec, whose model signature is made from inputs()). Nothing is checked again here.
  static ValidatedInputs AssumeValidated(std::vector<InputView> inputs) {
    return ValidatedInputs(std::move(inputs));
  }

  /// Plans for one shape per graph input (in graph order); see ExecutionPlan::Create for
  /// `fixed_inputs`. `intra_op_threads` > 0 prepares the kernels with that many threads
  /// instead of ModelOptions::intra_op_threads (a StreamSession trying fewer, see
  /// StreamSessionOptions::choose_threads).
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> Plan(
      const std::vector<Shape>& input_shapes,
      const std::vector<const TensorValue*>& fixed_inputs = {}, int intra_op_threads = 0) const;
  /// ModelOptions::intra_op_threads.
  int intra_op_threads() const { return options_.intra_op_threads; }

  /// True for an input whose value may decide shapes: a scalar or 1-D int32, int64, float32,
  /// float64 or bool tensor of at most kMaxValueKeyElements elements (a shape, axes, pads, Resize's
  /// scales, Range's bounds, an If's condition, a Loop's trip count); every input of a model with
  /// an op whose output sizes follow its input values (HasValueDependentShape), which is planned
  /// per input value: its plans compute at plan time and run as constants, one plan per distinct
  /// input (a slow path, bounded by the sessions' plan limits; docs/operators.md). Such a model
  /// is also cut at those ops (value_split()), and a session replays the part in front of them.
  bool IsValueKeyCandidate(const TensorValue& input) const;
  static constexpr int64_t kMaxValueKeyElements = 64;
  /// True when every input is a value-key candidate (see IsValueKeyCandidate).
  bool keyed_by_all_values() const { return keyed_by_all_values_; }

  using SplitModels = engine::SplitModels;
  /// Null unless the model has value-dependent nodes with nodes in front of them (and
  /// ModelOptions::split_at_value_dependent_nodes).
  const SplitModels* value_split() const { return split_.has_value() ? &*split_ : nullptr; }

  /// Plans for `inputs` (ordered as MatchInputs returns them). When `value_keyed` is false it
  /// first plans for their shapes alone; if that fails and some inputs are value-key
  /// candidates, it plans again with those inputs' values fixed (a value-keyed plan, valid only
  /// for those values; models whose shape inputs are graph inputs need it) and sets
  /// `*value_keyed`. With `value_keyed` true it fixes the candidates' values at once.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> PlanForInputs(
      const std::vector<const TensorValue*>& inputs, bool* value_keyed,
      int intra_op_threads = 0) const;

 private:
  Model(Graph graph, const KernelRegistry& registry, ModelOptions options, LoadStats stats);

  Graph graph_;
  const KernelRegistry& registry_;
  ModelOptions options_;
  LoadStats stats_;
  bool keyed_by_all_values_ = false;
  std::optional<SplitModels> split_;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_MODEL_H_
