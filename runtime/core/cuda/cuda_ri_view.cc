// The CUDA backend's side of the instance JSON writer (runtime/core/ri_json.h): Reprise's task
// lists, plus per task the number of graph nodes it became and, for the instance, the CUDA
// graph itself, read back from its nodes and edges.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/cuda/cuda_model_ri.h"
#include "runtime/core/ri_json.h"

namespace reprise::runtime::cuda {
namespace {

const char* NodeTypeName(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeKernel:
      return "kernel";
    case cudaGraphNodeTypeMemcpy:
      return "memcpy";
    case cudaGraphNodeTypeMemset:
      return "memset";
    case cudaGraphNodeTypeHost:
      return "host";
    case cudaGraphNodeTypeGraph:
      return "graph";
    case cudaGraphNodeTypeEmpty:
      return "empty";
    case cudaGraphNodeTypeWaitEvent:
      return "event_wait";
    case cudaGraphNodeTypeEventRecord:
      return "event_record";
    case cudaGraphNodeTypeMemAlloc:
      return "mem_alloc";
    case cudaGraphNodeTypeMemFree:
      return "mem_free";
    case cudaGraphNodeTypeConditional:
      return "conditional";
    default:
      return "other";
  }
}

// The graph's nodes with their types and dependencies (indices into the node list).
void AppendGraph(cudaGraph_t graph, std::string* out) {
  size_t count = 0;
  if (graph == nullptr || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) {
    absl::StrAppend(out, "{\"nodes\": []}");
    return;
  }
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) count = 0;
  absl::flat_hash_map<cudaGraphNode_t, size_t> index;
  for (size_t i = 0; i < count; ++i) index[nodes[i]] = i;
  absl::StrAppend(out, "{\"num_nodes\": ", count, ", \"nodes\": [");
  for (size_t i = 0; i < count; ++i) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    (void)cudaGraphNodeGetType(nodes[i], &type);
    absl::StrAppend(out, i ? ", " : "", "{\"index\": ", i, ", \"type\": \"", NodeTypeName(type),
                    "\", \"deps\": [");
    size_t num_deps = 0;
    (void)cudaGraphNodeGetDependencies(nodes[i], nullptr, nullptr, &num_deps);
    std::vector<cudaGraphNode_t> deps(num_deps);
    if (num_deps > 0 &&
        cudaGraphNodeGetDependencies(nodes[i], deps.data(), nullptr, &num_deps) != cudaSuccess) {
      num_deps = 0;
    }
    for (size_t d = 0; d < num_deps; ++d) {
      auto it = index.find(deps[d]);
      absl::StrAppend(out, d ? ", " : "",
                      it == index.end() ? -1 : static_cast<int64_t>(it->second));
    }
    absl::StrAppend(out, "]}");
  }
  absl::StrAppend(out, "]}");
}

class CudaRiView final : public RiEnumeration {
 public:
  explicit CudaRiView(const CudaModelRI& ri) : ri_(ri) {}

  uint64_t id() const override { return ri_.id(); }
  absl::string_view backend() const override { return "cuda"; }
  bool child() const override { return ri_.parent() != nullptr; }
  size_t NumStreams() const override { return ri_.streams.size(); }
  size_t NumTasks(int stream) const override { return ri_.streams[stream].size(); }

  // CudaTask keeps each argument in its own field, so every field is passed on; the writer
  // reads those of the task's kind (switch / activate tasks are never recorded on cuda).
  RiTaskView Task(int stream, size_t index) const override {
    const CudaTask& task = ri_.streams[stream][index];
    const std::span<const void* const> args(task.args);
    const size_t num_inputs = std::min<size_t>(task.num_inputs, args.size());
    RiTaskView view;
    view.seq = task.seq;
    view.kind = task.kind;
    view.group = task.group;
    view.op = task.op;
    view.kernel = task.kernel;
    view.inputs = args.first(num_inputs);
    view.outputs = args.subspan(num_inputs);
    view.workspace = task.workspace;
    view.copy_kind = task.copy_kind;
    view.dst = task.dst;
    view.src = task.src;
    view.bytes = task.bytes;
    view.value = task.value;
    view.external = task.external;
    view.event = task.dst;      // event tasks keep the event in dst
    view.user_data = task.dst;  // host functions keep their user data in dst
    if (task.kind == TaskKind::kConditional) {
      const CudaModelRI::Conditional& conditional = ri_.conditionals[task.value];
      view.conditional = conditional.kind;
      view.condition = conditional.condition->value;
      for (const CudaModelRI* body : conditional.bodies) {
        view.bodies.push_back(std::make_unique<CudaRiView>(*body));
      }
    }
    return view;
  }

  size_t NumGroups() const override { return ri_.groups.size(); }
  RiGroupView Group(size_t index) const override {
    const auto& members = ri_.groups[index];
    if (members.empty()) return RiGroupView{};
    return RiGroupView{members[0].first, static_cast<uint32_t>(members[0].second),
                       static_cast<uint32_t>(members.size())};
  }

  void AppendTaskExtras(int stream, size_t index, std::string* out) const override {
    absl::StrAppend(out, ", \"graph_nodes\": ", ri_.streams[stream][index].num_nodes);
  }
  void AppendInstanceExtras(std::string* out) const override {
    absl::StrAppend(out, ",\n \"graph\": ");
    AppendGraph(ri_.graph(), out);
  }

 private:
  const CudaModelRI& ri_;
};

}  // namespace

std::string CudaModelRI::DumpJson(DumpFlags flags) const {
  return WriteRiJson(CudaRiView(*this), flags);
}

}  // namespace reprise::runtime::cuda
