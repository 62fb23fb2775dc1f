#include "runtime/engine/value_split.h"

#include <utility>

#include "runtime/engine/optimizer.h"

namespace reprise::runtime::engine {
namespace {

bool IsValueDependentNode(const Node& node) {
  if (HasValueDependentShape(node.op)) return true;
  for (const Subgraph& subgraph : node.subgraphs) {
    if (AnyValueDependentShape(*subgraph.graph)) return true;
  }
  return false;
}

// A graph with `graph`'s values (the same ids) and opset, and nothing else.
Graph EmptyLike(const Graph& graph) {
  Graph part;
  part.opset = graph.opset;
  part.values.reserve(graph.values.size());
  for (const Value& value : graph.values) part.AddValue(value);
  return part;
}

// Shares the constants of `graph` that the nodes or outputs of `part` read.
void ShareConstants(const Graph& graph, Graph* part) {
  auto share = [&](int value) {
    if (value == Graph::kNoValue) return;
    auto it = graph.constants.find(value);
    if (it != graph.constants.end()) part->constants.emplace(value, it->second);
  };
  for (const Node& node : part->nodes) {
    for (int in : node.inputs) share(in);
  }
  for (const GraphOutput& out : part->outputs) share(out.value);
}

}  // namespace

bool AnyValueDependentShape(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (IsValueDependentNode(node)) return true;
  }
  return false;
}

std::optional<ValueSplit> SplitAtValueDependentNodes(const Graph& graph) {
  // A node goes to the tail when it is value-dependent or reads a value the tail writes.
  std::vector<bool> tail_value(graph.values.size(), false);
  std::vector<bool> in_tail(graph.nodes.size(), false);
  size_t tail_nodes = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    bool tail = IsValueDependentNode(node);
    for (int in : node.inputs) tail = tail || (in != Graph::kNoValue && tail_value[in]);
    if (!tail) continue;
    in_tail[i] = true;
    ++tail_nodes;
    for (int out : node.outputs) {
      if (out != Graph::kNoValue) tail_value[out] = true;
    }
  }
  if (tail_nodes == 0 || tail_nodes == graph.nodes.size()) return std::nullopt;

  ValueSplit split;
  split.prefix = EmptyLike(graph);
  split.tail = EmptyLike(graph);
  std::vector<bool> prefix_value(graph.values.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    if (in_tail[i]) {
      split.tail.nodes.push_back(node);
      continue;
    }
    split.prefix.nodes.push_back(node);
    for (int out : node.outputs) {
      if (out != Graph::kNoValue) prefix_value[out] = true;
    }
  }
  // The frontier: prefix values the tail reads, in the order it first reads them; the whole
  // graph's inputs it reads, in the graph's order.
  std::vector<bool> read_by_tail(graph.values.size(), false);
  std::vector<int> frontier;
  for (const Node& node : split.tail.nodes) {
    for (int in : node.inputs) {
      if (in == Graph::kNoValue || read_by_tail[in]) continue;
      read_by_tail[in] = true;
      if (prefix_value[in]) frontier.push_back(in);
    }
  }
  split.frontier = frontier.size();
  split.prefix.inputs = graph.inputs;
  for (int value : frontier) {
    split.prefix.outputs.push_back(GraphOutput{graph.values[value].name, value});
    split.tail.inputs.push_back(value);
  }
  for (size_t k = 0; k < graph.inputs.size(); ++k) {
    if (!read_by_tail[graph.inputs[k]]) continue;
    split.tail.inputs.push_back(graph.inputs[k]);
    split.tail_graph_inputs.push_back(k);
  }
  for (const GraphOutput& out : graph.outputs) {
    Graph& holder = tail_value[out.value] ? split.tail : split.prefix;
    split.outputs.push_back(ValueSplit::Source{tail_value[out.value], holder.outputs.size()});
    holder.outputs.push_back(out);
  }
  ShareConstants(graph, &split.prefix);
  ShareConstants(graph, &split.tail);
  if (!split.prefix.Validate().ok() || !split.tail.Validate().ok()) return std::nullopt;
  return split;
}

}  // namespace reprise::runtime::engine
