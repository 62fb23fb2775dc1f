// DumpJson for the CUDA backend's instances: Reprise's task lists (the same format as the CPU
// backend's) plus the CUDA graph itself, read back from its nodes and edges.
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/cuda/cuda_model_ri.h"
#include "runtime/core/json_text.h"

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

void AppendInstance(const CudaModelRI& ri, bool verbose, int indent, std::string* out);

void AppendTask(const CudaModelRI& ri, const CudaTask& task, bool verbose, int indent,
                std::string* out) {
  const std::string pad(indent, ' ');
  absl::StrAppend(out, pad, "{\"seq\": ", task.seq,
                  ", \"kind\": ", JsonQuote(TaskKindName(task.kind)),
                  ", \"graph_nodes\": ", task.num_nodes);
  if (task.group >= 0) absl::StrAppend(out, ", \"group\": ", task.group);
  switch (task.kind) {
    case TaskKind::kKernel:
      absl::StrAppend(out, ", \"op\": ", JsonQuote(task.op));
      if (verbose) {
        absl::StrAppend(out, ", \"args\": [");
        for (size_t i = 0; i < task.args.size(); ++i) {
          absl::StrAppend(out, i ? ", " : "", JsonPointer(task.args[i]));
        }
        absl::StrAppend(out, "]");
      }
      break;
    case TaskKind::kCopy:
      if (verbose) {
        absl::StrAppend(out, ", \"direction\": ", JsonQuote(CopyKindName(task.copy_kind)),
                        ", \"dst\": ", JsonPointer(task.dst), ", \"src\": ", JsonPointer(task.src),
                        ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kMemset:
      if (verbose) {
        absl::StrAppend(out, ", \"dst\": ", JsonPointer(task.dst), ", \"value\": ", task.value,
                        ", \"bytes\": ", task.bytes);
      }
      break;
    case TaskKind::kEventRecord:
    case TaskKind::kEventWait:
      absl::StrAppend(out, ", \"external\": ", task.external ? "true" : "false");
      if (verbose) absl::StrAppend(out, ", \"event\": ", JsonPointer(task.dst));
      break;
    case TaskKind::kEventReset:
      if (verbose) absl::StrAppend(out, ", \"event\": ", JsonPointer(task.dst));
      break;
    case TaskKind::kHostFunc:
      if (verbose) absl::StrAppend(out, ", \"user_data\": ", JsonPointer(task.dst));
      break;
    case TaskKind::kConditional: {
      const auto& cond = ri.conditionals[task.value];
      absl::StrAppend(out, ", \"type\": ", JsonQuote(ConditionalKindName(cond.kind)));
      if (verbose) absl::StrAppend(out, ", \"condition\": ", JsonPointer(cond.condition->value));
      absl::StrAppend(out, ", \"bodies\": [\n");
      for (size_t b = 0; b < cond.bodies.size(); ++b) {
        AppendInstance(*cond.bodies[b], verbose, indent + 2, out);
        absl::StrAppend(out, b + 1 < cond.bodies.size() ? ",\n" : "\n");
      }
      absl::StrAppend(out, pad, "]");
      break;
    }
  }
  absl::StrAppend(out, "}");
}

void AppendInstance(const CudaModelRI& ri, bool verbose, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  size_t total = 0;
  for (const auto& tasks : ri.streams) total += tasks.size();
  absl::StrAppend(out, pad, "{\"instance\": ", ri.id(),
                  ", \"backend\": \"cuda\", \"child\": ", ri.parent() != nullptr ? "true" : "false",
                  ", \"num_streams\": ", ri.streams.size(), ", \"num_tasks\": ", total, ",\n");
  absl::StrAppend(out, pad, " \"streams\": [\n");
  for (size_t s = 0; s < ri.streams.size(); ++s) {
    absl::StrAppend(out, pad, "  {\"index\": ", s, ", \"tasks\": [\n");
    const auto& tasks = ri.streams[s];
    for (size_t t = 0; t < tasks.size(); ++t) {
      AppendTask(ri, tasks[t], verbose, indent + 4, out);
      absl::StrAppend(out, t + 1 < tasks.size() ? ",\n" : "\n");
    }
    absl::StrAppend(out, pad, "  ]}", s + 1 < ri.streams.size() ? ",\n" : "\n");
  }
  absl::StrAppend(out, pad, " ],\n", pad, " \"graph\": ");
  AppendGraph(ri.graph(), out);
  absl::StrAppend(out, "}");
}

}  // namespace

std::string CudaModelRI::DumpJson(DumpFlags flags) const {
  std::string out;
  AppendInstance(*this, flags == DumpFlags::kVerbose, 0, &out);
  absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace reprise::runtime::cuda
