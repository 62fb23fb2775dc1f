// The backend registry: a fixed table (no static initialisers); the CPU is always present.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/device.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/status_macros.h"
#include "runtime/core/stream.h"
#if REPRISE_WITH_CUDA
#include "runtime/core/cuda/cuda_device.h"
#endif

namespace reprise::runtime {

std::vector<std::string> AvailableBackends() {
#if REPRISE_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(absl::string_view name) {
  if (name == "cpu") {
    ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> backend, cpu::CpuBackend::Create());
    return std::unique_ptr<Backend>(std::move(backend));
  }
#if REPRISE_WITH_CUDA
  if (name == "cuda") {
    ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> backend, cuda::CudaBackend::Create());
    return std::unique_ptr<Backend>(std::move(backend));
  }
#endif
  return absl::NotFoundError(absl::StrCat(
      "no backend \"", name, "\"; available: ", absl::StrJoin(AvailableBackends(), ", ")));
}

}  // namespace reprise::runtime

namespace reprise::runtime {

absl::Status Stream::RunHostFuncAndWait(HostFn fn, void* user_data) {
  RETURN_IF_ERROR(LaunchHostFunc(fn, user_data));
  return Synchronize();
}

absl::Status ModelRI::Execute(Stream* stream) {
  RETURN_IF_ERROR(ExecuteAsync(stream));
  return stream->Synchronize();
}

}  // namespace reprise::runtime
