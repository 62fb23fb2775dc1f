// The model-switch sample (issue 23): an instance built without capture (runtime/core/build.h)
// over five persistent streams, with out_k = self_k + other * 1.2 (4x2 floats; self1 = 1,
// self2 = 2, self3 = 3, other = 2), device int32 right1 = 1 and right2 = 2, uint32 num and
// target:
//   stream1 (HEAD): copy self1 and other in, Add -> out1, copy num <- target,
//                   switch to stream3 if num == right1, switch to stream4 if num == right2
//   stream2: Add -> out2, activate the end stream
//   stream3: Add -> out3, activate the end stream
//   stream4: activate stream2
//   end stream: no tasks (the launch ends when every started stream has)
// Run 1 (target = 1) prints outputs 1-3 (output 2 is never written: it stays zero); run 2
// (target = 2, set through another stream) prints output 2. The instance's JSON dump goes to
// ./modelRI.json.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/build.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime {
namespace {

constexpr int kCount = 8;  // shape [4, 2]
constexpr size_t kBytes = kCount * sizeof(float);

// Device memory holding `count` copies of `value`, written before the build.
template <typename T>
absl::StatusOr<T*> DeviceFilled(Device* device, T value, int count = 1) {
  ASSIGN_OR_RETURN(void* ptr, device->Malloc(count * sizeof(T)));
  const std::vector<T> values(count, value);
  RETURN_IF_ERROR(device->Memcpy(ptr, values.data(), count * sizeof(T), CopyKind::kHostToDevice));
  return static_cast<T*>(ptr);
}

absl::Status PrintOutput(Device* device, int k, const float* out) {
  std::vector<float> values(kCount);
  RETURN_IF_ERROR(device->Memcpy(values.data(), out, kBytes, CopyKind::kDeviceToHost));
  std::printf("output %d:", k);
  for (float value : values) std::printf(" %.4f", value);
  std::printf("\n");
  return absl::OkStatus();
}

absl::Status RunModelSwitch() {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend("cpu"));
  ASSIGN_OR_RETURN(Device * device, backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(device->kernels()));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 5; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->CreateStream());
    streams.push_back(std::move(stream));
  }
  Stream* s1 = streams[0].get();
  Stream* s2 = streams[1].get();
  Stream* s3 = streams[2].get();
  Stream* s4 = streams[3].get();
  Stream* end = streams[4].get();

  // Everything is allocated and prepared before the build.
  ASSIGN_OR_RETURN(void* host, device->MallocHost(2 * kBytes));
  auto* host_floats = static_cast<float*>(host);
  for (int i = 0; i < kCount; ++i) {
    host_floats[i] = 1.0f;           // self1
    host_floats[kCount + i] = 2.0f;  // other
  }
  ASSIGN_OR_RETURN(float* self1, DeviceFilled(device, 0.0f, kCount));
  ASSIGN_OR_RETURN(float* self2, DeviceFilled(device, 2.0f, kCount));
  ASSIGN_OR_RETURN(float* self3, DeviceFilled(device, 3.0f, kCount));
  ASSIGN_OR_RETURN(float* other, DeviceFilled(device, 0.0f, kCount));
  float* out[3];
  for (float*& o : out) {
    ASSIGN_OR_RETURN(o, DeviceFilled(device, 0.0f, kCount));
  }
  ASSIGN_OR_RETURN(int32_t * right1, DeviceFilled<int32_t>(device, 1));
  ASSIGN_OR_RETURN(int32_t * right2, DeviceFilled<int32_t>(device, 2));
  ASSIGN_OR_RETURN(uint32_t * num, DeviceFilled<uint32_t>(device, 0));
  ASSIGN_OR_RETURN(uint32_t * target, DeviceFilled<uint32_t>(device, 0));
  std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kFloat32, {4, 2}});
  Attributes attributes;
  attributes.Set("alpha", 1.2f);
  PrepareContext context;
  context.op = "Add";
  context.inputs = inputs;
  context.attributes = &attributes;
  ASSIGN_OR_RETURN(std::unique_ptr<PreparedKernel> add, device->kernels()->Prepare(context));
  auto add_on = [&](Stream* stream, const float* self, float* result) {
    const void* add_inputs[] = {self, other};
    void* add_outputs[] = {result};
    return stream->LaunchKernel(*add, add_inputs, add_outputs, nullptr);
  };

  ASSIGN_OR_RETURN(std::unique_ptr<ModelRI> ri, BuildBegin(device));
  RETURN_IF_ERROR(BindStream(*ri, s1, StreamBinding::kHead));
  for (Stream* stream : {s2, s3, s4, end}) {
    RETURN_IF_ERROR(BindStream(*ri, stream, StreamBinding::kDefault));
  }
  RETURN_IF_ERROR(s1->MemcpyAsync(self1, host_floats, kBytes, CopyKind::kHostToDevice));
  RETURN_IF_ERROR(s1->MemcpyAsync(other, host_floats + kCount, kBytes, CopyKind::kHostToDevice));
  RETURN_IF_ERROR(add_on(s1, self1, out[0]));
  RETURN_IF_ERROR(s1->MemcpyAsync(num, target, sizeof(uint32_t), CopyKind::kDeviceToDevice));
  RETURN_IF_ERROR(SwitchStream(num, CompareOp::kEqual, right1, SwitchDataType::kInt32, s3, s1));
  RETURN_IF_ERROR(SwitchStream(num, CompareOp::kEqual, right2, SwitchDataType::kInt32, s4, s1));
  RETURN_IF_ERROR(add_on(s2, self2, out[1]));
  RETURN_IF_ERROR(ActiveStream(end, s2));
  RETURN_IF_ERROR(add_on(s3, self3, out[2]));
  RETURN_IF_ERROR(ActiveStream(end, s3));
  RETURN_IF_ERROR(ActiveStream(s2, s4));
  for (Stream* stream : {s1, s2, s3, s4, end}) RETURN_IF_ERROR(EndTask(*ri, stream));
  RETURN_IF_ERROR(BuildEnd(*ri));
  for (Stream* stream : {s1, s2, s3, s4, end}) RETURN_IF_ERROR(UnbindStream(*ri, stream));

  // The target is written through another stream, in that stream's order, before each run.
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> setter, device->CreateStream());
  ASSIGN_OR_RETURN(void* host_target, device->MallocHost(sizeof(uint32_t)));
  for (uint32_t run : {1u, 2u}) {
    *static_cast<uint32_t*>(host_target) = run;
    RETURN_IF_ERROR(
        setter->MemcpyAsync(target, host_target, sizeof(uint32_t), CopyKind::kHostToDevice));
    RETURN_IF_ERROR(setter->Synchronize());
    RETURN_IF_ERROR(ExecuteAsync(*ri, s1));
    RETURN_IF_ERROR(s1->Synchronize());
    std::printf("execute model, target = %u.\n", run);
    if (run == 1) {
      for (int k = 1; k <= 3; ++k) RETURN_IF_ERROR(PrintOutput(device, k, out[k - 1]));
    } else {
      RETURN_IF_ERROR(PrintOutput(device, 2, out[1]));
    }
  }

  std::ofstream json("modelRI.json");
  json << DumpJson(*ri, DumpFlags::kVerbose);
  json.close();
  if (!json) return absl::InternalError("cannot write modelRI.json in the working directory");

  ri.reset();
  for (void* ptr : std::initializer_list<void*>{self1, self2, self3, other, out[0], out[1], out[2],
                                                right1, right2, num, target}) {
    RETURN_IF_ERROR(device->Free(ptr));
  }
  RETURN_IF_ERROR(device->FreeHost(host_target));
  return device->FreeHost(host);
}

}  // namespace
}  // namespace reprise::runtime

int main() {
  absl::Status status = reprise::runtime::RunModelSwitch();
  if (!status.ok()) {
    std::fprintf(stderr, "model_switch: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
