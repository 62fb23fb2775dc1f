#include "runtime/core/cuda/cuda_model_ri.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cuda/condition_kernels.h"
#include "runtime/core/cuda/cuda_device.h"
#include "runtime/core/cuda/cuda_stream.h"
#include "runtime/core/cuda/cuda_util.h"

namespace reprise::runtime::cuda {

uint64_t NextCudaObjectId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

CudaModelRI::CudaModelRI(CudaDevice* device, CudaModelRI* parent, cudaGraph_t body_graph)
    : device_(device), parent_(parent), id_(NextCudaObjectId()), graph_(body_graph) {}

CudaModelRI::~CudaModelRI() {
  if (parent_ != nullptr) return;  // a body: its graph belongs to the parent's node
  (void)cudaSetDevice(device_->ordinal());
  ScopedCudaRelaxed relaxed;
  if (last_launch_ != nullptr) {
    // Pending launches still use the exec and the host calls: let them finish.
    (void)cudaEventSynchronize(last_launch_);
    (void)cudaEventDestroy(last_launch_);
  }
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  std::vector<CudaModelRI*> pending = {this};
  while (!pending.empty()) {
    CudaModelRI* ri = pending.back();
    pending.pop_back();
    for (auto& condition : ri->conditions_) (void)cudaFree(condition->value);
    for (auto& child : ri->children_) pending.push_back(child.get());
  }
}

absl::Status CudaModelRI::Seal(cudaGraph_t graph) {
  graph_ = graph;
  ScopedCudaRelaxed relaxed;
  RETURN_IF_ERROR(CudaStatus(cudaGraphInstantiate(&exec_, graph_, 0),
                             absl::StrCat("cudaGraphInstantiate of instance ", id_)));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&last_launch_, cudaEventDisableTiming),
                             "cudaEventCreate"));
  sealed_ = true;
  return absl::OkStatus();
}

CudaModelRI* CudaModelRI::AddChild(cudaGraph_t body_graph) {
  children_.push_back(std::make_unique<CudaModelRI>(device_, this, body_graph));
  return children_.back().get();
}

const CudaModelRI::Condition* CudaModelRI::FindCondition(const ConditionHandle& handle) const {
  if (handle.owner != this || handle.index < 0 ||
      static_cast<size_t>(handle.index) >= conditions_.size()) {
    return nullptr;
  }
  return conditions_[handle.index].get();
}

absl::Status CudaModelRI::ExecuteAsync(Stream* stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  if (parent_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", id_, " is a conditional body; it runs only through its parent"));
  }
  if (!sealed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", id_, " is still being captured"));
  }
  if (cuda_stream == nullptr || cuda_stream->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("instance ", id_, " can only execute on a stream of ", device_->name()));
  }
  if (cuda_stream->capturing()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "instance ", id_, " cannot execute on cuda stream ", stream->id(), ": it is capturing"));
  }
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(launch_mu_);
  RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec_, cuda_stream->handle()),
                             absl::StrCat("launch of instance ", id_)));
  return CudaStatus(cudaEventRecord(last_launch_, cuda_stream->handle()), "launch event record");
}

absl::StatusOr<ConditionHandle> CudaModelRI::CreateCondition(uint32_t default_value,
                                                             bool assign_default) {
  RETURN_IF_ERROR(device_->Activate());
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture == nullptr || capture->status != CaptureStatus::kActive) {
    return absl::FailedPreconditionError(
        absl::StrCat("create condition: instance ", id_, " is not being captured"));
  }
  CudaStream* origin = capture->streams[0];
  auto condition = std::make_unique<Condition>();
  {
    ScopedCudaRelaxed relaxed;  // an internal allocation, made before the value is used
    RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(reinterpret_cast<void**>(&condition->value), sizeof(uint32_t)),
                   "condition value malloc"));
    absl::Status status = CudaStatus(
        cudaMemcpy(condition->value, &default_value, sizeof(uint32_t), cudaMemcpyHostToDevice),
        "condition value init");
    if (status.ok()) {
      status = CudaStatus(
          cudaGraphConditionalHandleCreate(&condition->handle, capture->graph, default_value,
                                           assign_default ? cudaGraphCondAssignDefault : 0),
          "cudaGraphConditionalHandleCreate");
    }
    if (!status.ok()) {
      (void)cudaFree(condition->value);
      return status;
    }
  }
  if (assign_default) {
    // Reset the value at this point of every launch.
    RETURN_IF_ERROR(CudaStatus(LaunchWriteValue(condition->value, default_value, origin->handle()),
                               "condition default write"));
  }
  ConditionHandle handle;
  handle.value = condition->value;
  handle.index = static_cast<int>(conditions_.size());
  handle.owner = this;
  conditions_.push_back(std::move(condition));
  return handle;
}

size_t CudaModelRI::NumStreams() const { return streams.size(); }

absl::Status CudaModelRI::GetStreams(std::span<RiStreamInfo> out) const {
  if (out.size() < streams.size()) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", id_, " has ", streams.size(),
                                                   " streams; the array holds ", out.size()));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    out[i].index = static_cast<int>(i);
    out[i].num_tasks = streams[i].size();
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CudaModelRI::NumTasks(int stream) const {
  if (stream < 0 || static_cast<size_t>(stream) >= streams.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("instance ", id_, " has no stream ", stream, " (", streams.size(), ")"));
  }
  return streams[stream].size();
}

absl::Status CudaModelRI::GetTasks(int stream, std::span<TaskInfo> out) const {
  ASSIGN_OR_RETURN(size_t count, NumTasks(stream));
  if (out.size() < count) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", stream, " of instance ", id_, " has ",
                                                   count, " tasks; the array holds ", out.size()));
  }
  for (size_t i = 0; i < count; ++i) {
    const CudaTask& task = streams[stream][i];
    out[i].seq = task.seq;
    out[i].kind = task.kind;
    out[i].op = task.op;
    out[i].stream = stream;
    out[i].group = task.group;
  }
  return absl::OkStatus();
}

absl::Status CudaModelRI::ApplyUpdate(int group, std::vector<CudaTask>& tasks,
                                      std::vector<std::unique_ptr<HostCall>>& calls) {
  const auto& members = groups[group];
  if (members.size() != tasks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("task update of group ", group, " of instance ",
                                                   id_, ": ", tasks.size(),
                                                   " tasks given, the group has ", members.size()));
  }
  std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> pairs;  // (instance, scratch)
  for (size_t i = 0; i < members.size(); ++i) {
    const CudaTask& old_task = streams[members[i].first][members[i].second];
    const CudaTask& new_task = tasks[i];
    if (old_task.kind != new_task.kind ||
        (old_task.kind == TaskKind::kKernel && old_task.args.size() != new_task.args.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task update of group ", group, " of instance ", id_, ": task ", i, " is a ",
          TaskKindName(new_task.kind), ", the group has a ", TaskKindName(old_task.kind)));
    }
    if (old_task.num_nodes == 0 && new_task.num_nodes == 0) continue;  // e.g. a reset
    if (old_task.num_nodes != 1 || new_task.num_nodes != 1 || old_task.node == nullptr ||
        new_task.node == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("task update of group ", group, " of instance ", id_, ": task ", i,
                       " became ", old_task.num_nodes, " graph nodes (now ", new_task.num_nodes,
                       "); only single-node tasks can be updated on cuda"));
    }
    cudaGraphNodeType old_type, new_type;
    RETURN_IF_ERROR(CudaStatus(cudaGraphNodeGetType(old_task.node, &old_type), "node type"));
    RETURN_IF_ERROR(CudaStatus(cudaGraphNodeGetType(new_task.node, &new_type), "node type"));
    if (old_type != new_type) {
      return absl::InvalidArgumentError(absl::StrCat("task update of group ", group, ": task ", i,
                                                     " has graph node type ", new_type,
                                                     ", the group has ", old_type));
    }
    pairs.emplace_back(old_task.node, new_task.node);
  }
  ScopedCudaRelaxed relaxed;
  std::lock_guard<std::mutex> lock(launch_mu_);
  for (const auto& [node, scratch] : pairs) {
    cudaGraphNodeType type;
    RETURN_IF_ERROR(CudaStatus(cudaGraphNodeGetType(node, &type), "node type"));
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        cudaKernelNodeParams params = {};
        RETURN_IF_ERROR(CudaStatus(cudaGraphKernelNodeGetParams(scratch, &params), "get kernel"));
        RETURN_IF_ERROR(CudaStatus(cudaGraphExecKernelNodeSetParams(exec_, node, &params),
                                   "cudaGraphExecKernelNodeSetParams"));
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        cudaMemcpy3DParms params = {};
        RETURN_IF_ERROR(CudaStatus(cudaGraphMemcpyNodeGetParams(scratch, &params), "get copy"));
        RETURN_IF_ERROR(CudaStatus(cudaGraphExecMemcpyNodeSetParams(exec_, node, &params),
                                   "cudaGraphExecMemcpyNodeSetParams"));
        break;
      }
      case cudaGraphNodeTypeMemset: {
        cudaMemsetParams params = {};
        RETURN_IF_ERROR(CudaStatus(cudaGraphMemsetNodeGetParams(scratch, &params), "get memset"));
        RETURN_IF_ERROR(CudaStatus(cudaGraphExecMemsetNodeSetParams(exec_, node, &params),
                                   "cudaGraphExecMemsetNodeSetParams"));
        break;
      }
      case cudaGraphNodeTypeHost: {
        cudaHostNodeParams params = {};
        RETURN_IF_ERROR(CudaStatus(cudaGraphHostNodeGetParams(scratch, &params), "get host"));
        RETURN_IF_ERROR(CudaStatus(cudaGraphExecHostNodeSetParams(exec_, node, &params),
                                   "cudaGraphExecHostNodeSetParams"));
        break;
      }
      default:
        return absl::UnimplementedError(
            absl::StrCat("task update: graph node type ", type, " cannot be updated"));
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    CudaTask& old_task = streams[members[i].first][members[i].second];
    tasks[i].seq = old_task.seq;
    tasks[i].stream = old_task.stream;
    tasks[i].group = group;
    tasks[i].node = old_task.node;  // the instance's node, now with the new parameters
    old_task = std::move(tasks[i]);
  }
  for (auto& call : calls) host_calls.push_back(std::move(call));
  return absl::OkStatus();
}

}  // namespace reprise::runtime::cuda
