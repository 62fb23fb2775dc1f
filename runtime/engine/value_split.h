// A graph whose output sizes follow values (NonZero, NonMaxSuppression, ...) cut in two: the
// part no such op feeds, planned from shapes and replayed, and the rest, planned for the values
// the first part computed (docs/development.md, "Output sizes that follow values").
#ifndef REPRISE_RUNTIME_ENGINE_VALUE_SPLIT_H_
#define REPRISE_RUNTIME_ENGINE_VALUE_SPLIT_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// True when a node of `graph` or of its subgraphs has output sizes that follow its input values
/// (HasValueDependentShape).
bool AnyValueDependentShape(const Graph& graph);

/// The two graphs of a split. Both share the whole graph's constants and value ids.
struct ValueSplit {
  /// Every node that no value-dependent node feeds (directly or through other nodes). Its
  /// inputs are the whole graph's inputs, in order; its outputs are first the `frontier` values
  /// the tail reads, then the whole graph's outputs that it holds.
  Graph prefix;
  /// The other nodes, in the whole graph's order. Its inputs are the frontier
  /// values (in the prefix's output order), then the whole graph's inputs it reads; its outputs
  /// are the whole graph's outputs its nodes write.
  Graph tail;
  size_t frontier = 0;
  /// For tail input `frontier + j`: the index of the whole graph's input it is.
  std::vector<size_t> tail_graph_inputs;
  /// For each output of the whole graph: which graph holds it and at which output index.
  struct Source {
    bool tail = false;
    size_t index = 0;
  };
  std::vector<Source> outputs;
};

/// Splits `graph` (optimised, before layouts are chosen: a frontier value must stay plain) at
/// its value-dependent nodes. nullopt when it has none, or when no node is left in front of
/// them (nothing to replay).
std::optional<ValueSplit> SplitAtValueDependentNodes(const Graph& graph);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_VALUE_SPLIT_H_
