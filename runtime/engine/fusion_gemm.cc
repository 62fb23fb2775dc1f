#include "runtime/engine/fusion_gemm.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/fusion_util.h"

namespace reprise::runtime::engine {

using fusion::IsDefaultDomain;

int FuseGemmEpilogues(Graph* graph, const KernelRegistry& registry) {
  if (!registry.Has(kernels::cpu::kFusedGemmOp)) return 0;
  const std::vector<int> uses = graph->UseCounts();
  std::vector<bool> drop(graph->nodes.size(), false);
  int absorbed = 0;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    const Node& gemm = graph->nodes[i];
    if (drop[i] || gemm.op != "Gemm" || !IsDefaultDomain(gemm) || gemm.outputs.size() != 1 ||
        gemm.inputs.size() < 2) {
      continue;
    }
    auto consumer = [&](int value) {
      const int at = fusion::SoleConsumer(*graph, uses, value);
      return at >= 0 && !drop[at] ? at : -1;
    };
    int out = gemm.outputs[0];
    std::vector<int> taken;
    std::string activation;
    float lo = -INFINITY, hi = INFINITY;
    int next = consumer(out);
    if (next >= 0) {
      const Node& act = graph->nodes[next];
      if (IsDefaultDomain(act) && act.outputs.size() == 1 && act.inputs[0] == out) {
        if (act.op == "Relu" || act.op == "Tanh" || act.op == "Sigmoid") {
          activation = act.op;
        } else if (act.op == "Clip" && fusion::ClipBounds(*graph, act, &lo, &hi)) {
          activation = "Clip";
        }
      }
      if (!activation.empty()) {
        taken.push_back(next);
        out = act.outputs[0];
        next = consumer(out);
      }
    }
    int residual = Graph::kNoValue;
    if (next >= 0) {
      const Node& add = graph->nodes[next];
      if (add.op == "Add" && IsDefaultDomain(add) && add.inputs.size() == 2 &&
          add.outputs.size() == 1 && add.inputs[0] != add.inputs[1]) {
        const int other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
        if (!graph->IsConstant(other)) {
          residual = other;
          taken.push_back(next);
          out = add.outputs[0];
        }
      }
    }
    if (taken.empty()) continue;
    Node fused;
    fused.op = kernels::cpu::kFusedGemmOp;
    fused.domain = kernels::cpu::kFusedDomain;
    fused.name = gemm.name;
    fused.attributes = gemm.attributes;
    fused.attributes.Set("activation", activation);
    if (activation == "Clip") {
      fused.attributes.Set("clip_min", lo);
      fused.attributes.Set("clip_max", hi);
    }
    fused.inputs = gemm.inputs;
    if (residual != Graph::kNoValue) {
      fused.inputs.resize(3, Graph::kNoValue);
      fused.inputs.push_back(residual);
    }
    fused.outputs = {out};
    // The fused node runs where the last absorbed node ran: the residual exists by then.
    drop[i] = true;
    for (int t : taken) drop[t] = true;
    drop[taken.back()] = false;
    graph->nodes[taken.back()] = std::move(fused);
    absorbed += static_cast<int>(taken.size());
  }
  fusion::DropNodes(graph, drop);
  return absorbed;
}

}  // namespace reprise::runtime::engine
