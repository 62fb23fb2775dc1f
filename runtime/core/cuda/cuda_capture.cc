#include "runtime/core/cuda/cuda_capture.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/cuda/cuda_device.h"

namespace reprise::runtime::cuda {

void CUDART_CB RunHostCall(void* host_call) {
  auto* call = static_cast<HostCall*>(host_call);
  absl::Status status = call->fn(call->user_data);
  if (!status.ok()) {
    call->device->RecordAsyncError(
        absl::Status(status.code(), absl::StrCat("host function: ", status.message())));
  }
  if (call->self_delete) delete call;
}

size_t GraphNodeCount(cudaGraph_t graph) {
  size_t count = 0;
  if (graph == nullptr || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return 0;
  return count;
}

}  // namespace reprise::runtime::cuda
