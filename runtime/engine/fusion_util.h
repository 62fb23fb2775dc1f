// Small graph queries shared by the load-time rewrites (fusion_*.cc).
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_UTIL_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_UTIL_H_

#include <vector>

#include "runtime/engine/graph.h"

namespace reprise::runtime::engine::fusion {

/// True for a node of the default ONNX domain.
inline bool IsDefaultDomain(const Node& node) {
  return node.domain.empty() || node.domain == "ai.onnx";
}

inline bool IsGraphOutput(const Graph& graph, int value) {
  for (const GraphOutput& out : graph.outputs) {
    if (out.value == value) return true;
  }
  return false;
}

/// Index of the only node reading `value` (per `uses`, from Graph::UseCounts), or -1 when it
/// has several uses, none, or is a graph output.
inline int SoleConsumer(const Graph& graph, const std::vector<int>& uses, int value) {
  if (value == Graph::kNoValue || uses[value] != 1 || IsGraphOutput(graph, value)) return -1;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int in : graph.nodes[i].inputs) {
      if (in == value) return static_cast<int>(i);
    }
  }
  return -1;
}

/// Removes the nodes marked in `drop`, keeping the order of the others.
inline void DropNodes(Graph* graph, const std::vector<bool>& drop) {
  std::vector<Node> kept;
  kept.reserve(graph->nodes.size());
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  graph->nodes = std::move(kept);
}

}  // namespace reprise::runtime::engine::fusion

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_UTIL_H_
