#include "runtime/engine/fusion_layout.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine {
namespace {

using fusion::IsDefaultDomain;
using kernels::cpu::kFusedDomain;
using kernels::cpu::kFusedTransposeOp;

// The shape_of index of each inner value of a chain (kFusedTransposeOp).
enum Inner { kConcat = 0, kReshaped = 1, kTransposed = 2, kResult = 3 };

bool IsPlainShape(const Node& node) {
  return node.op == "Shape" && IsDefaultDomain(node) && node.inputs.size() == 1 &&
         node.outputs.size() == 1 && !node.attributes.Has("start") && !node.attributes.Has("end");
}

bool IsReshape(const Graph& graph, const Node& node) {
  return node.op == "Reshape" && IsDefaultDomain(node) && graph.opset >= 5 &&
         node.inputs.size() == 2 && node.inputs[1] != Graph::kNoValue && node.outputs.size() == 1;
}

// For each value, the nodes reading it (once per input slot).
std::vector<std::vector<int>> Readers(const Graph& graph) {
  std::vector<std::vector<int>> readers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int in : graph.nodes[i].inputs) {
      if (in != Graph::kNoValue) readers[in].push_back(static_cast<int>(i));
    }
  }
  return readers;
}

// Splits the readers of `value` into Shape nodes (`shapes`) and the rest (`others`). False when
// the value is a graph output (it must stay a value of its own).
bool SplitReaders(const Graph& graph, const std::vector<std::vector<int>>& readers, int value,
                  std::vector<int>* others, std::vector<int>* shapes) {
  if (fusion::IsGraphOutput(graph, value)) return false;
  for (int r : readers[value]) {
    (IsPlainShape(graph.nodes[r]) ? shapes : others)->push_back(r);
  }
  return true;
}

struct Chain {
  int concat = -1, reshape1 = -1, transpose = -1, reshape2 = -1;
  std::vector<int> slices;
  std::vector<std::pair<int, int>> shape_readers;  // (node, Inner)
};

// The chain around Transpose node `t`, or nullopt-like (transpose -1) when nothing fuses.
Chain FindChain(const Graph& graph, const std::vector<int>& producer,
                const std::vector<std::vector<int>>& readers, int t) {
  Chain chain;
  const Node& tnode = graph.nodes[t];
  if (tnode.op != "Transpose" || !IsDefaultDomain(tnode) || tnode.inputs.size() != 1 ||
      tnode.inputs[0] == Graph::kNoValue || tnode.outputs.size() != 1) {
    return chain;
  }
  auto perm = tnode.attributes.GetInts("perm", {});
  // The last axis must stay last, so that the elements move in rows.
  const int64_t rank = perm.ok() ? static_cast<int64_t>(perm->size()) : 0;
  if (rank == 0 || (perm->back() != rank - 1 && perm->back() != -1)) return chain;
  std::vector<std::pair<int, int>> shapes_found;
  auto take_shapes = [&](const std::vector<int>& shapes, int inner) {
    for (int s : shapes) shapes_found.emplace_back(s, inner);
  };
  // Backwards: [Concat ->] [Reshape ->] Transpose.
  int next = t;
  int x = tnode.inputs[0];
  std::vector<int> others, shapes;
  if (producer[x] >= 0 && IsReshape(graph, graph.nodes[producer[x]]) &&
      SplitReaders(graph, readers, x, &others, &shapes) && others == std::vector<int>{t}) {
    chain.reshape1 = producer[x];
    take_shapes(shapes, kReshaped);
    next = chain.reshape1;
    x = graph.nodes[chain.reshape1].inputs[0];
  }
  others.clear();
  shapes.clear();
  if (x != Graph::kNoValue && producer[x] >= 0) {
    const Node& c = graph.nodes[producer[x]];
    const bool all_present = std::none_of(c.inputs.begin(), c.inputs.end(),
                                          [](int in) { return in == Graph::kNoValue; });
    if (c.op == "Concat" && IsDefaultDomain(c) && c.attributes.Has("axis") && !c.inputs.empty() &&
        all_present && c.outputs.size() == 1 && SplitReaders(graph, readers, x, &others, &shapes) &&
        others == std::vector<int>{next}) {
      chain.concat = producer[x];
      take_shapes(shapes, kConcat);
    }
  }
  // Forwards: Transpose [-> Reshape] [-> Slices].
  int y = tnode.outputs[0];
  if (y == Graph::kNoValue) return chain;
  others.clear();
  shapes.clear();
  std::vector<int> t_shapes;
  if (SplitReaders(graph, readers, y, &others, &shapes) && others.size() == 1 &&
      IsReshape(graph, graph.nodes[others[0]]) && graph.nodes[others[0]].inputs[1] != y &&
      graph.nodes[others[0]].outputs[0] != Graph::kNoValue) {
    chain.reshape2 = others[0];
    t_shapes = shapes;
    y = graph.nodes[chain.reshape2].outputs[0];
  }
  others.clear();
  shapes.clear();
  if (graph.opset >= 10 && SplitReaders(graph, readers, y, &others, &shapes) && !others.empty()) {
    bool all_slices = true;
    for (int s : others) {
      const Node& node = graph.nodes[s];
      all_slices = all_slices && node.op == "Slice" && IsDefaultDomain(node) &&
                   node.inputs.size() >= 3 && node.inputs.size() <= 5 && node.inputs[0] == y &&
                   std::count(node.inputs.begin(), node.inputs.end(), y) == 1 &&
                   node.inputs[1] != Graph::kNoValue && node.inputs[2] != Graph::kNoValue &&
                   node.outputs.size() == 1 && node.outputs[0] != Graph::kNoValue;
    }
    if (all_slices) {
      chain.slices = others;
      take_shapes(shapes, chain.reshape2 >= 0 ? kResult : kTransposed);
    }
  }
  if (chain.reshape2 >= 0 && chain.slices.empty()) {
    // The result stays a value: the second Reshape is a view of the Transpose's output anyway.
    chain.reshape2 = -1;
    t_shapes.clear();
  }
  take_shapes(t_shapes, kTransposed);
  if (chain.concat < 0 && chain.slices.empty()) return chain;
  chain.transpose = t;
  chain.shape_readers = std::move(shapes_found);
  return chain;
}

// True when a value the fused node reads depends on one of the chain's Slices (the node would
// then depend on itself).
bool ReadsItsOwnOutput(const Graph& graph, const std::vector<int>& producer, const Chain& chain,
                       const std::vector<int>& fused_inputs) {
  std::vector<bool> seen(graph.nodes.size(), false);
  std::vector<int> stack;
  for (int in : fused_inputs) {
    if (in != Graph::kNoValue && producer[in] >= 0) stack.push_back(producer[in]);
  }
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    if (seen[n]) continue;
    seen[n] = true;
    if (std::count(chain.slices.begin(), chain.slices.end(), n) > 0) return true;
    for (int in : graph.nodes[n].inputs) {
      if (in != Graph::kNoValue && producer[in] >= 0) stack.push_back(producer[in]);
    }
  }
  return false;
}

// Reorders the nodes so that each comes after the producers of its inputs, keeping the given
// order where it already does (smallest index first among the ready nodes).
void SortTopologically(Graph* graph) {
  const size_t n = graph->nodes.size();
  const std::vector<int> producer = fusion::Producers(*graph);
  std::vector<std::vector<int>> consumers(n);
  std::vector<int> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (int in : graph->nodes[i].inputs) {
      if (in == Graph::kNoValue || producer[in] < 0 || producer[in] == static_cast<int>(i)) {
        continue;
      }
      ++pending[i];
      consumers[producer[in]].push_back(static_cast<int>(i));
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (order.size() != n) return;  // a cycle: left as it is, for Graph::Validate to name
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(graph->nodes[i]));
  graph->nodes = std::move(sorted);
}

// Rewrites the graph for `chain`; false (nothing changed) when the fused node would read its own
// output.
bool Rewrite(Graph* graph, const std::vector<int>& producer, const Chain& chain) {
  const Node& tnode = graph->nodes[chain.transpose];
  std::vector<int> parts =
      chain.concat >= 0
          ? graph->nodes[chain.concat].inputs
          : std::vector<int>{chain.reshape1 >= 0 ? graph->nodes[chain.reshape1].inputs[0]
                                                 : tnode.inputs[0]};
  const int s1 = chain.reshape1 >= 0 ? graph->nodes[chain.reshape1].inputs[1] : Graph::kNoValue;
  const int s2 = chain.reshape2 >= 0 ? graph->nodes[chain.reshape2].inputs[1] : Graph::kNoValue;

  Node fused;
  fused.op = kFusedTransposeOp;
  fused.domain = kFusedDomain;
  fused.name = tnode.name;
  fused.inputs = parts;
  fused.inputs.push_back(s1);
  fused.inputs.push_back(s2);
  Attributes attrs;
  attrs.Set("concat_inputs", static_cast<int64_t>(parts.size()));
  if (chain.concat >= 0) {
    if (const AttributeValue* axis = graph->nodes[chain.concat].attributes.Find("axis")) {
      attrs.Set("axis", *axis);
    }
  }
  if (const AttributeValue* perm = tnode.attributes.Find("perm")) attrs.Set("perm", *perm);
  const std::pair<int, const char*> reshapes[] = {{chain.reshape1, "allowzero"},
                                                  {chain.reshape2, "allowzero_2"}};
  for (const auto& [r, name] : reshapes) {
    if (r < 0) continue;
    if (const AttributeValue* allowzero = graph->nodes[r].attributes.Find("allowzero")) {
      attrs.Set(name, *allowzero);
    }
  }
  attrs.Set("slices", static_cast<int64_t>(chain.slices.size()));
  for (int s : chain.slices) {
    const Node& slice = graph->nodes[s];
    for (size_t i = 1; i < 5; ++i) {
      fused.inputs.push_back(i < slice.inputs.size() ? slice.inputs[i] : Graph::kNoValue);
    }
    fused.outputs.push_back(slice.outputs[0]);
  }
  if (chain.slices.empty()) fused.outputs.push_back(tnode.outputs[0]);
  fused.attributes = attrs;
  if (ReadsItsOwnOutput(*graph, producer, chain, fused.inputs)) return false;

  // The Shape nodes that read inner values compute those shapes from the chain's inputs.
  for (const auto& [s, inner] : chain.shape_readers) {
    Node& shape = graph->nodes[s];
    Attributes shape_attrs = attrs;
    shape_attrs.Set("slices", int64_t{0});
    shape_attrs.Set("shape_of", static_cast<int64_t>(inner));
    shape.op = kFusedTransposeOp;
    shape.domain = kFusedDomain;
    shape.inputs = parts;
    shape.inputs.push_back(inner >= kReshaped ? s1 : Graph::kNoValue);
    shape.inputs.push_back(inner >= kResult ? s2 : Graph::kNoValue);
    shape.attributes = std::move(shape_attrs);
  }
  std::vector<bool> drop(graph->nodes.size(), false);
  for (int n : {chain.concat, chain.reshape1, chain.reshape2}) {
    if (n >= 0) drop[n] = true;
  }
  for (int n : chain.slices) drop[n] = true;
  graph->nodes[chain.transpose] = std::move(fused);
  std::vector<Node> kept;
  kept.reserve(graph->nodes.size());
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  graph->nodes = std::move(kept);
  SortTopologically(graph);
  return true;
}

}  // namespace

int FuseTransposeChains(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kFusedTransposeOp)) return 0;
  int fused = 0;
  // One chain per pass: a rewrite moves the nodes. Each pass fuses a Transpose away or stops.
  for (;;) {
    const std::vector<int> producer = fusion::Producers(*graph);
    const std::vector<std::vector<int>> readers = Readers(*graph);
    bool rewrote = false;
    for (size_t t = 0; t < graph->nodes.size() && !rewrote; ++t) {
      if (graph->nodes[t].op != "Transpose") continue;
      const Chain chain = FindChain(*graph, producer, readers, static_cast<int>(t));
      if (chain.transpose < 0) continue;
      rewrote = Rewrite(graph, producer, chain);
    }
    if (!rewrote) break;
    ++fused;
  }
  return fused;
}

}  // namespace reprise::runtime::engine
