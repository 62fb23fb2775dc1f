// The backend registry: a fixed table (no static initialisers); the CPU is always present. Also
// the default (UNIMPLEMENTED) bodies of the interfaces' optional slots.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/device.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/stream.h"
#if REPRISE_WITH_CUDA
#include "runtime/core/cuda/cuda_device.h"
#endif

namespace reprise::runtime {

absl::StatusOr<std::unique_ptr<ModelRI>> Device::BuildBegin() {
  return absl::UnimplementedError(
      absl::StrCat(name(), ": this backend cannot build instances (BuildBegin); capture instead"));
}

absl::Status Stream::SwitchStream(const void*, CompareOp, const void*, SwitchDataType, Stream*) {
  return absl::UnimplementedError(
      absl::StrCat("stream ", id(), ": this backend cannot record stream switches"));
}

absl::Status Stream::ActiveStream(Stream*) {
  return absl::UnimplementedError(
      absl::StrCat("stream ", id(), ": this backend cannot record stream activations"));
}

namespace {

absl::Status CannotBuild(const ModelRI& instance) {
  return absl::UnimplementedError(
      absl::StrCat("instance ", instance.id(), ": this backend cannot build instances"));
}

}  // namespace

absl::Status ModelRI::BindStream(Stream*, StreamBinding) { return CannotBuild(*this); }
absl::Status ModelRI::EndTask(Stream*) { return CannotBuild(*this); }
absl::Status ModelRI::BuildEnd() { return CannotBuild(*this); }
absl::Status ModelRI::UnbindStream(Stream*) { return CannotBuild(*this); }

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
