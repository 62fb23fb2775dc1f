// Book-keeping of the CUDA backend's captures. CUDA's stream capture records the graph; this
// keeps what Reprise adds on top: the Reprise streams taking part and the task list per stream
// (for enumeration, task groups and DumpJson). The capture's mode, thread and status, and the
// capture-mode rules of runtime/core/capture.h, are the core's capture registry
// (runtime/core/capture_registry.h), shared with every other backend, not CUDA's.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_CAPTURE_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_CAPTURE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/capture_registry.h"
#include "runtime/core/kernel.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime::cuda {

class CudaDevice;
class CudaModelRI;
class CudaStream;

/// A host function as CUDA calls it: the trampoline reports an error to the device's async
/// error slot. Eager calls delete themselves after running; recorded ones are owned by their
/// instance (or by a pending task update) and run once per replay.
struct HostCall {
  HostFn fn = nullptr;
  void* user_data = nullptr;
  CudaDevice* device = nullptr;
  bool self_delete = false;
};
void CUDART_CB RunHostCall(void* host_call);

/// One recorded task: what Reprise issued, and the graph node(s) it became. `node` is the last
/// node the task added (nullptr for tasks that add none: internal event record / wait, reset).
struct CudaTask {
  uint32_t seq = 0;
  TaskKind kind = TaskKind::kCopy;
  std::string op;                          // kernels
  const PreparedKernel* kernel = nullptr;  // kernels, for DumpJson(kVerbose); borrowed
  uint16_t num_inputs = 0;                 // kernels: args = inputs, then outputs
  int stream = 0;
  int group = -1;
  cudaGraphNode_t node = nullptr;
  size_t num_nodes = 0;
  // Arguments, for DumpJson(kVerbose).
  CopyKind copy_kind = CopyKind::kDeviceToDevice;
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
  uint32_t value = 0;  // memset value, or the conditional's index
  bool external = false;
  std::vector<const void*> args;  // kernel inputs then outputs
  const void* workspace = nullptr;
};

/// One capture: of a top-level instance, of a conditional body, or the private capture that
/// collects a task update (not checked by the unsafe-call rule). Guarded by CaptureMutex().
struct CudaCapture : CaptureRecord {
  enum class Purpose : uint8_t { kInstance, kBody, kUpdate };
  Purpose purpose = Purpose::kInstance;
  cudaGraph_t graph = nullptr;  // the graph being filled (CUDA-owned until EndCapture)
  std::unique_ptr<CudaModelRI> owned_instance;  // kInstance: handed out by EndCapture
  CudaModelRI* instance = nullptr;              // kInstance / kBody: the instance being filled
  std::vector<CudaStream*> streams;             // [0] is the origin
  int open_group = -1;
  uint32_t next_seq = 0;
  // kUpdate: the replacement tasks and their host calls.
  std::vector<CudaTask> update_tasks;
  std::vector<std::unique_ptr<HostCall>> update_host_calls;
};

/// Number of nodes in `graph` (0 on error).
size_t GraphNodeCount(cudaGraph_t graph);

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_CAPTURE_H_
