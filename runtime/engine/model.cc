#include "runtime/engine/model.h"

#include <algorithm>
#include <exception>
#include <new>
#include <stdexcept>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/fusion_conv.h"
#include "runtime/engine/onnx_import.h"
#include "runtime/engine/optimizer.h"
#include "runtime/engine/value_split.h"

namespace reprise::runtime::engine {

namespace {

// The load boundary: nothing a model file provokes escapes as an exception. The importer and
// the passes return statuses; this catches what slips through (an allocation that fails, a
// library that throws) and turns it into the load's error.
template <typename Fn>
absl::StatusOr<std::shared_ptr<const Model>> Guarded(absl::string_view what, Fn&& load) {
  try {
    return load();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": out of memory while loading the model"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": a size is too large while loading the model (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": loading the model failed: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, ": loading the model failed"));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Model>> Model::FromGraph(Graph graph,
                                                              const KernelRegistry& registry,
                                                              const ModelOptions& options) {
  return Guarded("model", [&]() -> absl::StatusOr<std::shared_ptr<const Model>> {
    LoadStats stats;
    stats.imported_nodes = static_cast<int>(graph.nodes.size());
    RETURN_IF_ERROR(graph.Validate());
    RETURN_IF_ERROR(OptimizeForInference(&graph, registry, options.max_folded_bytes,
                                         /*choose_layouts=*/false));
    // A graph with value-dependent nodes is also cut at them, before layouts are chosen: the
    // values that cross the cut must be plain, as outputs of the first part.
    std::optional<ValueSplit> split;
    if (options.split_at_value_dependent_nodes) split = SplitAtValueDependentNodes(graph);
    KeepBlockedLayoutBetweenConvs(&graph);
    stats.nodes = static_cast<int>(graph.nodes.size());
    stats.constants = static_cast<int>(graph.constants.size());
    auto model = std::shared_ptr<Model>(new Model(std::move(graph), registry, options, stats));
    if (split.has_value()) {
      KeepBlockedLayoutBetweenConvs(&split->prefix);
      KeepBlockedLayoutBetweenConvs(&split->tail);
      auto part = [&](Graph g) {
        LoadStats part_stats;
        part_stats.imported_nodes = stats.imported_nodes;
        part_stats.nodes = static_cast<int>(g.nodes.size());
        part_stats.constants = static_cast<int>(g.constants.size());
        return std::shared_ptr<const Model>(new Model(std::move(g), registry, options, part_stats));
      };
      SplitModels& models = model->split_.emplace();
      models.prefix = part(std::move(split->prefix));
      models.tail = part(std::move(split->tail));
      models.frontier = split->frontier;
      models.tail_graph_inputs = std::move(split->tail_graph_inputs);
      models.outputs = std::move(split->outputs);
    }
    return std::shared_ptr<const Model>(std::move(model));
  });
}

absl::StatusOr<std::shared_ptr<const Model>> Model::LoadFile(const std::string& path,
                                                             const KernelRegistry& registry,
                                                             const ModelOptions& options) {
  return Guarded(absl::StrCat("\"", path, "\""),
                 [&]() -> absl::StatusOr<std::shared_ptr<const Model>> {
                   ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(path, registry));
                   return FromGraph(std::move(graph), registry, options);
                 });
}

absl::StatusOr<std::shared_ptr<const Model>> Model::LoadBytes(absl::string_view bytes,
                                                              const KernelRegistry& registry,
                                                              const ModelOptions& options) {
  return Guarded("onnx model", [&]() -> absl::StatusOr<std::shared_ptr<const Model>> {
    ASSIGN_OR_RETURN(Graph graph, ImportOnnxBytes(bytes, registry));
    return FromGraph(std::move(graph), registry, options);
  });
}

std::vector<Value> Model::inputs() const {
  std::vector<Value> result;
  for (int id : graph_.inputs) result.push_back(graph_.values[id]);
  return result;
}

std::vector<Value> Model::outputs() const {
  std::vector<Value> result;
  for (const GraphOutput& out : graph_.outputs) {
    Value value = graph_.values[out.value];
    value.name = out.name;
    result.push_back(std::move(value));
  }
  return result;
}

absl::StatusOr<std::vector<const TensorValue*>> Model::MatchInputs(
    const std::vector<NamedTensor>& inputs) const {
  absl::flat_hash_map<std::string, const TensorValue*> given;
  for (const NamedTensor& input : inputs) {
    if (!given.emplace(input.name, &input.value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("input \"", input.name, "\" is given more than once"));
    }
  }
  std::vector<const TensorValue*> ordered;
  std::vector<std::string> missing;
  for (int id : graph_.inputs) {
    const Value& value = graph_.values[id];
    auto it = given.find(value.name);
    if (it == given.end()) {
      missing.push_back(absl::StrCat("\"", value.name, "\" (", DataTypeName(value.dtype), " ",
                                     DimsToString(value.dims), ")"));
      continue;
    }
    const TensorValue& tensor = *it->second;
    if (tensor.dtype != value.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", value.name, "\" has element type ",
                                                     DataTypeName(tensor.dtype), ", expected ",
                                                     DataTypeName(value.dtype)));
    }
    bool shape_ok = !value.has_shape || tensor.shape.size() == value.dims.size();
    for (size_t i = 0; shape_ok && value.has_shape && i < value.dims.size(); ++i) {
      if (value.dims[i].known() && value.dims[i].value != tensor.shape[i]) shape_ok = false;
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", value.name, "\" has shape ",
                                                     ShapeToString(tensor.shape), ", expected ",
                                                     DimsToString(value.dims)));
    }
    const size_t bytes =
        static_cast<size_t>(NumElements(tensor.shape)) * DataTypeSize(tensor.dtype);
    if (tensor.bytes.size() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", value.name, "\" has ", tensor.bytes.size(), " bytes, shape ",
          ShapeToString(tensor.shape), " of ", DataTypeName(tensor.dtype), " needs ", bytes));
    }
    // A string input's views are staged as they are: each must lie in its own string bytes.
    RETURN_IF_ERROR(CheckStringTensor(tensor, absl::StrCat("input \"", value.name, "\"")));
    ordered.push_back(&tensor);
    given.erase(it);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing input(s): ", absl::StrJoin(missing, ", ")));
  }
  if (!given.empty()) {
    std::vector<std::string> extra;
    for (const auto& [name, tensor] : given) extra.push_back(absl::StrCat("\"", name, "\""));
    std::sort(extra.begin(), extra.end());
    std::vector<std::string> expected;
    for (int id : graph_.inputs)
      expected.push_back(absl::StrCat("\"", graph_.values[id].name, "\""));
    return absl::InvalidArgumentError(absl::StrCat("unknown input(s) ", absl::StrJoin(extra, ", "),
                                                   "; the model's inputs are ",
                                                   absl::StrJoin(expected, ", ")));
  }
  return ordered;
}

absl::StatusOr<ValidatedInputs> Model::Validate(const std::vector<NamedTensor>& inputs) const {
  ASSIGN_OR_RETURN(std::vector<const TensorValue*> ordered, MatchInputs(inputs));
  std::vector<InputView> views;
  views.reserve(ordered.size());
  for (const TensorValue* value : ordered) {
    InputView view;
    view.dtype = value->dtype;
    view.shape = value->shape;
    view.pieces.emplace_back(value->bytes.data(), value->bytes.size());
    view.value = value;
    views.push_back(std::move(view));
  }
  return ValidatedInputs(std::move(views));
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Model::Plan(
    const std::vector<Shape>& input_shapes, const std::vector<const TensorValue*>& fixed_inputs,
    int intra_op_threads) const {
  PlanOptions options;
  options.intra_op_threads = intra_op_threads > 0 ? intra_op_threads : options_.intra_op_threads;
  const int threads = std::max(1, options.intra_op_threads);
  options.max_branch_streams = options_.max_branch_streams > 0
                                   ? std::min(options_.max_branch_streams, threads)
                                   : std::min(threads, kMaxBranchStreams);
  options.max_plan_bytes = options_.max_plan_bytes;
  return ExecutionPlan::Create(graph_, registry_, input_shapes, options, fixed_inputs);
}

Model::Model(Graph graph, const KernelRegistry& registry, ModelOptions options, LoadStats stats)
    : graph_(std::move(graph)), registry_(registry), options_(options), stats_(stats) {
  keyed_by_all_values_ = AnyValueDependentShape(graph_);
}

bool Model::IsValueKeyCandidate(const TensorValue& input) const {
  if (keyed_by_all_values_) return true;
  const bool numeric = input.dtype == DataType::kInt64 || input.dtype == DataType::kInt32 ||
                       input.dtype == DataType::kFloat32 || input.dtype == DataType::kFloat64 ||
                       input.dtype == DataType::kBool;
  return numeric && input.shape.size() <= 1 && NumElements(input.shape) <= kMaxValueKeyElements;
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Model::PlanForInputs(
    const std::vector<const TensorValue*>& inputs, bool* value_keyed, int intra_op_threads) const {
  std::vector<Shape> shapes;
  std::vector<const TensorValue*> fixed;
  bool any_candidate = false;
  for (const TensorValue* input : inputs) {
    shapes.push_back(input->shape);
    const bool candidate = IsValueKeyCandidate(*input);
    any_candidate |= candidate;
    fixed.push_back(candidate ? input : nullptr);
  }
  if (*value_keyed) return Plan(shapes, fixed, intra_op_threads);
  if (keyed_by_all_values_) {  // the shape-only plan cannot succeed
    *value_keyed = true;
    return Plan(shapes, fixed, intra_op_threads);
  }
  auto plan = Plan(shapes, {}, intra_op_threads);
  if (plan.ok() || !any_candidate) return plan;
  auto keyed = Plan(shapes, fixed, intra_op_threads);
  if (!keyed.ok()) return plan.status();  // the shape-only error is the clearer one
  *value_keyed = true;
  return keyed;
}

}  // namespace reprise::runtime::engine
