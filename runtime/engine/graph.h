// The engine's graph IR: values, nodes, constants, graph inputs and outputs.
#ifndef REPRISE_RUNTIME_ENGINE_GRAPH_H_
#define REPRISE_RUNTIME_ENGINE_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/kernel.h"

namespace reprise::runtime::engine {

/// One dimension of a declared shape: a fixed size (`value` >= 0) or unknown (`value` < 0,
/// optionally named by `symbol`, e.g. "batch").
struct Dim {
  int64_t value = -1;
  std::string symbol;
  bool known() const { return value >= 0; }
};

/// "[N,3,224,224]": unknown dims print their symbol or "?".
std::string DimsToString(const std::vector<Dim>& dims);

/// A tensor of the graph. `has_shape` is false when the model declares no shape (any rank).
struct Value {
  std::string name;
  DataType dtype = DataType::kUndefined;
  bool has_shape = false;
  std::vector<Dim> dims;
};

struct Graph;

/// A graph attribute of a control-flow node (If's then_branch / else_branch, Loop's body).
/// The subgraph's inputs are its formal inputs (none for If; iteration number, condition and
/// loop-carried values for Loop) followed by the outer values it reads (ONNX lets a subgraph
/// read any value of an enclosing graph by name): `outer_inputs[k]` is the index in the
/// node's `inputs` of the subgraph's input `num_formal_inputs + k`.
struct Subgraph {
  std::string attribute;
  std::shared_ptr<Graph> graph;
  size_t num_formal_inputs = 0;
  std::vector<size_t> outer_inputs;
};

/// One operator application. Inputs and outputs are value ids; an absent optional input is
/// `kNoValue`. A control-flow node's inputs are its ONNX inputs followed by the outer values
/// its subgraphs read.
struct Node {
  std::string op;
  std::string name;
  std::string domain;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attributes attributes;
  std::vector<Subgraph> subgraphs;
  /// The subgraph of attribute `attribute`, or nullptr.
  const Subgraph* FindSubgraph(absl::string_view attribute) const;
};

/// True for If and Loop (nodes with subgraphs, planned by the engine itself).
bool IsControlFlowOp(absl::string_view op);

/// A graph output: the name clients see and the value that holds it (after Identity removal
/// the value may have another name, or be a graph input or a constant).
struct GraphOutput {
  std::string name;
  int value = -1;
};

/// A whole model graph in topological order. Move-only; constants are heap-allocated so that
/// pointers to their bytes stay valid while the graph lives (kernels may keep them); they are
/// shared, so that the two parts of a value split (value_split.h) hold the same constants.
struct Graph {
  static constexpr int kNoValue = -1;

  std::vector<Value> values;
  std::vector<Node> nodes;
  /// Value id → its value, for initializers, Constant nodes and folded results.
  absl::flat_hash_map<int, std::shared_ptr<TensorValue>> constants;
  std::vector<int> inputs;  // graph inputs that are not initializers
  std::vector<GraphOutput> outputs;
  int opset = 17;  // the default domain's opset

  Graph() = default;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  /// Adds a value and returns its id.
  int AddValue(Value value);
  /// Id of the value named `name`, or kNoValue.
  int FindValue(absl::string_view name) const;
  const TensorValue* FindConstant(int value) const;
  bool IsConstant(int value) const { return constants.contains(value); }

  /// Number of node inputs plus graph outputs that read each value.
  std::vector<int> UseCounts() const;

  /// Checks the invariants: ids in range, every node input defined before use (by a graph
  /// input, a constant or an earlier node), each value defined once. Error names the value.
  absl::Status Validate() const;

 private:
  absl::flat_hash_map<std::string, int> by_name_;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_GRAPH_H_
