// The activations that a fused node (a convolution's, a transposed convolution's, a channel
// scale's) applies after its own work: matched on the graph and written as the fused node's
// attributes (kernels/cpu/fused_ops.h, kFusedConvOp's "activation").
#ifndef REPRISE_RUNTIME_ENGINE_FUSION_ACTIVATION_H_
#define REPRISE_RUNTIME_ENGINE_FUSION_ACTIVATION_H_

#include <string>
#include <vector>

#include "runtime/engine/graph.h"

namespace reprise::runtime::engine::fusion {

/// An activation that follows a value and can run as a convolution post-op: its name (a
/// kFusedConvOp "activation"), parameters, the nodes it takes and the value it produces.
struct Activation {
  std::string name;
  float lo = 0.0f, hi = 0.0f;       // Clip
  float alpha = 0.0f, beta = 0.0f;  // LeakyRelu, HardSigmoid
  std::vector<int> nodes;
  int out = Graph::kNoValue;
};

/// The activation applied to `value` when its reader(s) form one: a single Relu, LeakyRelu,
/// Clip (constant bounds), Sigmoid, Tanh, HardSigmoid or HardSwish, or x * Sigmoid(x) (SiLU as
/// exported: the value read by exactly a Sigmoid and the Mul of the two). Nodes marked in `drop`
/// are not taken; every intermediate must have no other use and not be a graph output.
bool MatchActivation(const Graph& graph, const std::vector<int>& uses, int value,
                     const std::vector<bool>& drop, Activation* act);

/// `act` as a fused node's attributes: "activation" and, where it has them, its parameters.
void SetActivationAttributes(const Activation& act, Node* node);

}  // namespace reprise::runtime::engine::fusion

#endif  // REPRISE_RUNTIME_ENGINE_FUSION_ACTIVATION_H_
