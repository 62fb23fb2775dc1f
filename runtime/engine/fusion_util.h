// Small graph queries shared by the load-time rewrites (fusion_*.cc).
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_UTIL_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_UTIL_H_

#include <cmath>
#include <cstring>
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

/// For each value, the index of the node that writes it; -1 for graph inputs and constants.
inline std::vector<int> Producers(const Graph& graph) {
  std::vector<int> producer(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int out : graph.nodes[i].outputs) {
      if (out != Graph::kNoValue) producer[out] = static_cast<int>(i);
    }
  }
  return producer;
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

/// Clip's bounds when constant: opset >= 11 reads the optional min/max inputs (absent is
/// -inf/+inf), earlier opsets the attributes. False when a bound is not a float constant.
inline bool ClipBounds(const Graph& graph, const Node& node, float* lo, float* hi) {
  if (graph.opset < 11) {
    auto min = node.attributes.GetFloat("min", -INFINITY);
    auto max = node.attributes.GetFloat("max", INFINITY);
    if (!min.ok() || !max.ok()) return false;
    *lo = *min;
    *hi = *max;
    return true;
  }
  float* bounds[2] = {lo, hi};
  const float fallback[2] = {-INFINITY, INFINITY};
  for (size_t k = 1; k <= 2; ++k) {
    if (k >= node.inputs.size() || node.inputs[k] == Graph::kNoValue) {
      *bounds[k - 1] = fallback[k - 1];
      continue;
    }
    const TensorValue* t = graph.FindConstant(node.inputs[k]);
    if (t == nullptr || t->dtype != DataType::kFloat32 || t->bytes.size() != sizeof(float)) {
      return false;
    }
    std::memcpy(bounds[k - 1], t->bytes.data(), sizeof(float));
  }
  return true;
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
