// The seed sample of capture_semantics.md §2 ("the simple model"): capture, in GLOBAL mode, an
// asynchronous host→device copy from pinned memory, a synchronous copy made in RELAXED thread
// mode (runs at once, not recorded), Add (alpha 1.1) and Mul; execute the instance 4 times,
// printing the output each time; write the instance's JSON dump to ./modelRI.json.
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime {
namespace {

constexpr int kCount = 8;  // shape [4, 2]
constexpr size_t kBytes = kCount * sizeof(float);

absl::StatusOr<std::unique_ptr<PreparedKernel>> Prepare(Device* device, absl::string_view op,
                                                        float alpha) {
  std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kFloat32, {4, 2}});
  Attributes attributes;
  if (alpha != 1.0f) attributes.Set("alpha", alpha);
  PrepareContext context;
  context.op = op;
  context.inputs = inputs;
  context.attributes = &attributes;
  return device->kernels()->Prepare(context);
}

absl::Status RunSimpleModel() {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend("cpu"));
  ASSIGN_OR_RETURN(Device * device, backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(device->kernels()));
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->CreateStream());
  // Everything is allocated and prepared before the capture.
  ASSIGN_OR_RETURN(void* host_self, device->MallocHost(kBytes));
  ASSIGN_OR_RETURN(void* self, device->Malloc(kBytes));
  ASSIGN_OR_RETURN(void* other, device->Malloc(kBytes));
  ASSIGN_OR_RETURN(void* out_tmp, device->Malloc(kBytes));
  ASSIGN_OR_RETURN(void* out, device->Malloc(kBytes));
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> add, Prepare(device, "Add", 1.1f));
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> mul, Prepare(device, "Mul", 1.0f));
  auto* self_values = static_cast<float*>(host_self);
  for (int i = 0; i < kCount; ++i) self_values[i] = static_cast<float>(i + 1);
  const std::vector<float> other_values(kCount, 2.0f);

  RETURN_IF_ERROR(BeginCapture(stream.get(), CaptureMode::kGlobal));
  RETURN_IF_ERROR(stream->MemcpyAsync(self, host_self, kBytes, CopyKind::kHostToDevice));
  CaptureMode mode = CaptureMode::kRelaxed;
  ExchangeThreadCaptureMode(&mode);
  RETURN_IF_ERROR(device->Memcpy(other, other_values.data(), kBytes, CopyKind::kHostToDevice));
  ExchangeThreadCaptureMode(&mode);
  const void* add_inputs[] = {self, other};
  void* add_outputs[] = {out_tmp};
  RETURN_IF_ERROR(stream->LaunchKernel(*add, add_inputs, add_outputs, nullptr));
  const void* mul_inputs[] = {out_tmp, other};
  void* mul_outputs[] = {out};
  RETURN_IF_ERROR(stream->LaunchKernel(*mul, mul_inputs, mul_outputs, nullptr));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRI> ri, EndCapture(stream.get()));

  std::vector<float> result(kCount);
  for (int loop = 1; loop <= 4; ++loop) {
    RETURN_IF_ERROR(ExecuteAsync(*ri, stream.get()));
    RETURN_IF_ERROR(stream->Synchronize());
    RETURN_IF_ERROR(device->Memcpy(result.data(), out, kBytes, CopyKind::kDeviceToHost));
    std::printf("execute model, loop count: %d.\n", loop);
    for (int i = 0; i < kCount; ++i) std::printf(i + 1 < kCount ? "%.4f " : "%.4f\n", result[i]);
  }

  std::ofstream json("modelRI.json");
  json << DumpJson(*ri, DumpFlags::kVerbose);
  json.close();
  if (!json) return absl::InternalError("cannot write modelRI.json in the working directory");

  ri.reset();
  for (void* ptr : {self, other, out_tmp, out}) RETURN_IF_ERROR(device->Free(ptr));
  return device->FreeHost(host_self);
}

}  // namespace
}  // namespace reprise::runtime

int main() {
  absl::Status status = reprise::runtime::RunSimpleModel();
  if (!status.ok()) {
    std::fprintf(stderr, "simple_model: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
