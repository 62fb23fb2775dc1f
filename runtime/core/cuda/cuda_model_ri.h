// The CUDA backend's model runtime instance: a captured cudaGraph_t and its cudaGraphExec_t,
// with Reprise's per-stream task lists kept beside them.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_MODEL_RI_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_MODEL_RI_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mutex>  // NOLINT: see docs/development.md (TSan)

#include "runtime/core/cuda/cuda_capture.h"
#include "runtime/core/model_ri.h"

namespace reprise::runtime::cuda {

class CudaDevice;

/// See ModelRI. Differences CUDA forces (README.md):
/// - EndCapture instantiates the graph (cudaGraphInstantiate); ExecuteAsync is one
///   cudaGraphLaunch. A second launch while one is pending is queued behind it by CUDA, on any
///   stream. Destroying the instance waits for its last launch to finish.
/// - Conditions are CUDA conditional handles (CUDA 12.4+). The value a task writes is a uint32
///   in device memory; a one-thread kernel captured just before the conditional node (and, for
///   WHILE, at the end of the body) copies it into the handle. With `assign_default`, a kernel
///   captured where CreateCondition is called writes the default value, so a host write made
///   before a launch does NOT survive it; without it the value persists across launches.
/// - Bodies (children) hold only what CUDA allows in a conditional body: kernels, device copies
///   and memsets, and nested conditionals (no host functions, no event records or waits).
///
/// Thread-safety: as ModelRI; mutable state is guarded by CaptureMutex() while capturing.
class CudaModelRI final : public ModelRI {
 public:
  struct Condition {
    uint32_t* value = nullptr;  // device memory, owned (freed with the instance)
    cudaGraphConditionalHandle handle = 0;
  };
  struct Conditional {
    ConditionalKind kind = ConditionalKind::kIf;
    const Condition* condition = nullptr;
    std::vector<CudaModelRI*> bodies;
  };

  CudaModelRI(CudaDevice* device, CudaModelRI* parent, cudaGraph_t body_graph);
  ~CudaModelRI() override;

  uint64_t id() const override { return id_; }
  absl::Status ExecuteAsync(Stream* stream) override;
  absl::StatusOr<ConditionHandle> CreateCondition(uint32_t default_value,
                                                  bool assign_default) override;
  size_t NumStreams() const override;
  absl::Status GetStreams(std::span<RiStreamInfo> out) const override;
  absl::StatusOr<size_t> NumTasks(int stream) const override;
  absl::Status GetTasks(int stream, std::span<TaskInfo> out) const override;
  std::string DumpJson(DumpFlags flags) const override;

  // Used by CudaStream while capturing and updating (caller holds CaptureMutex()).
  CudaModelRI* parent() const { return parent_; }
  CudaDevice* device() const { return device_; }
  cudaGraph_t graph() const { return graph_; }
  /// Takes the captured top-level graph and instantiates it.
  absl::Status Seal(cudaGraph_t graph);
  void MarkBodySealed() { sealed_ = true; }
  bool sealed() const { return sealed_; }
  CudaModelRI* AddChild(cudaGraph_t body_graph);
  const Condition* FindCondition(const ConditionHandle& handle) const;
  /// For a WHILE body: the condition its end re-evaluates.
  const Condition* loop_condition = nullptr;

  std::vector<std::vector<CudaTask>> streams;               // tasks per Reprise stream
  std::vector<std::vector<std::pair<int, size_t>>> groups;  // (stream, task index) per group
  std::vector<Conditional> conditionals;
  std::vector<std::unique_ptr<HostCall>> host_calls;
  CudaCapture* capture = nullptr;  // the capture filling it, while it lasts

  /// Applies an update: `tasks` replace group `group`'s tasks (checked: count, kinds, one node
  /// each, same node types). Nothing changes on error.
  absl::Status ApplyUpdate(int group, std::vector<CudaTask>& tasks,
                           std::vector<std::unique_ptr<HostCall>>& calls);

 private:
  CudaDevice* const device_;
  CudaModelRI* const parent_;
  const uint64_t id_;
  cudaGraph_t graph_ = nullptr;  // top-level: owned; body: owned by the conditional node
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t last_launch_ = nullptr;
  // CUDA graph objects are not internally synchronised: launches (and updates) are serialised.
  mutable std::mutex launch_mu_;
  std::atomic<bool> sealed_{false};
  std::vector<std::unique_ptr<Condition>> conditions_;
  std::vector<std::unique_ptr<CudaModelRI>> children_;
};

/// Process-unique ids for streams, instances and captures of the CUDA backend.
uint64_t NextCudaObjectId();

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_MODEL_RI_H_
