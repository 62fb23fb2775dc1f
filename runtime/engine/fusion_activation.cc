#include "runtime/engine/fusion_activation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine::fusion {

bool MatchActivation(const Graph& graph, const std::vector<int>& uses, int value,
                     const std::vector<bool>& drop, Activation* act) {
  if (value == Graph::kNoValue || IsGraphOutput(graph, value)) return false;
  auto usable = [&](const Node& node) {
    return fusion::IsDefaultDomain(node) && node.outputs.size() == 1 && !node.inputs.empty();
  };
  if (uses[value] == 2) {
    // SiLU: s = Sigmoid(x); y = Mul(x, s) (either order).
    int sigmoid = -1, mul = -1;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const Node& n = graph.nodes[i];
      if (drop[i] || std::find(n.inputs.begin(), n.inputs.end(), value) == n.inputs.end()) {
        continue;
      }
      if (n.op == "Sigmoid" && usable(n) && n.inputs.size() == 1) {
        sigmoid = static_cast<int>(i);
      } else if (n.op == "Mul" && usable(n) && n.inputs.size() == 2) {
        mul = static_cast<int>(i);
      }
    }
    if (sigmoid < 0 || mul < 0) return false;
    const int s = graph.nodes[sigmoid].outputs[0];
    const Node& m = graph.nodes[mul];
    const bool pair =
        (m.inputs[0] == value && m.inputs[1] == s) || (m.inputs[1] == value && m.inputs[0] == s);
    if (!pair || SoleConsumer(graph, uses, s) != mul) return false;
    act->name = "Swish";
    act->nodes = {sigmoid, mul};
    act->out = m.outputs[0];
    return true;
  }
  const int at = SoleConsumer(graph, uses, value);
  if (at < 0 || drop[at]) return false;
  const Node& n = graph.nodes[at];
  if (!usable(n) || n.inputs[0] != value) return false;
  if (n.op == "Relu" || n.op == "Sigmoid" || n.op == "Tanh" || n.op == "HardSwish") {
    act->name = n.op;
  } else if (n.op == "Gelu") {  // opset 20's, or FuseGelu's from Erf or Tanh
    absl::StatusOr<std::string> approximate = n.attributes.GetString("approximate", "none");
    if (!approximate.ok() || (*approximate != "none" && *approximate != "tanh")) return false;
    act->name = *approximate == "tanh" ? "GeluTanh" : "Gelu";
  } else if (n.op == "Clip" && fusion::ClipBounds(graph, n, &act->lo, &act->hi)) {
    act->name = "Clip";
  } else if (n.op == "LeakyRelu") {
    absl::StatusOr<float> alpha = n.attributes.GetFloat("alpha", 0.01f);
    if (!alpha.ok()) return false;
    act->name = "LeakyRelu";
    act->alpha = *alpha;
  } else if (n.op == "HardSigmoid") {
    absl::StatusOr<float> alpha = n.attributes.GetFloat("alpha", 0.2f);
    absl::StatusOr<float> beta = n.attributes.GetFloat("beta", 0.5f);
    if (!alpha.ok() || !beta.ok()) return false;
    act->name = "HardSigmoid";
    act->alpha = *alpha;
    act->beta = *beta;
  } else {
    return false;
  }
  act->nodes = {at};
  act->out = n.outputs[0];
  return true;
}

void SetActivationAttributes(const Activation& act, Node* node) {
  node->attributes.Set("activation", act.name);
  if (act.name == "Clip") {
    node->attributes.Set("clip_min", act.lo);
    node->attributes.Set("clip_max", act.hi);
  }
  if (act.name == "LeakyRelu" || act.name == "HardSigmoid") {
    node->attributes.Set("activation_alpha", act.alpha);
    node->attributes.Set("activation_beta", act.beta);
  }
}

}  // namespace reprise::runtime::engine::fusion
