// CPU-side checks of the CUDA backend and kernels: these run (and must pass) on machines
// without a GPU — registration, Prepare against the CPU reference, and the no-device path.
#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/core/device.h"

namespace reprise::runtime {
namespace {

using ::testing::Contains;

TEST(CudaBackendTest, AvailableBackendsListsCuda) {
  EXPECT_THAT(AvailableBackends(), Contains("cuda"));
}

TEST(CudaBackendTest, CreateBackendSaysWhyWhenNoDeviceIsUsable) {
  auto backend = CreateBackend("cuda");
  if (backend.ok()) {
    EXPECT_GE((*backend)->device_count(), 1);
    auto device = (*backend)->device(0);
    ASSERT_TRUE(device.ok());
    EXPECT_EQ((*device)->name(), "cuda:0");
    EXPECT_FALSE((*backend)->device((*backend)->device_count()).ok());
    return;
  }
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  EXPECT_THAT(std::string(backend.status().message()), ::testing::HasSubstr("cuda backend"));
}

TEST(CudaKernelsTest, EveryCudaOpHasACpuReference) {
  KernelRegistry cuda_registry, cpu_registry;
  ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(&cuda_registry).ok());
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&cpu_registry).ok());
  EXPECT_EQ(cuda_registry.Ops(), kernels::cuda::CudaKernelOps());
  for (const std::string& op : cuda_registry.Ops()) EXPECT_TRUE(cpu_registry.Has(op)) << op;
  // A second registration into the same registry is an error, not a silent overwrite.
  EXPECT_FALSE(kernels::cuda::RegisterCudaKernels(&cuda_registry).ok());
}

struct PrepareCase {
  std::string op;
  std::vector<TensorDesc> inputs;
  Attributes attributes;
};

std::vector<PrepareCase> PrepareCases() {
  std::vector<PrepareCase> cases;
  cases.push_back({"Add", {{DataType::kFloat32, {3, 1, 5}}, {DataType::kFloat32, {4, 5}}}, {}});
  cases.push_back({"Relu", {{DataType::kFloat32, {2, 7}}}, {}});
  PrepareCase transpose{"Transpose", {{DataType::kFloat32, {2, 3, 4}}}, {}};
  transpose.attributes.Set("perm", std::vector<int64_t>{2, 0, 1});
  cases.push_back(transpose);
  PrepareCase softmax{"Softmax", {{DataType::kFloat32, {4, 16}}}, {}};
  softmax.attributes.Set("axis", int64_t{-1});
  cases.push_back(softmax);
  PrepareCase concat{"Concat", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {2, 5}}}, {}};
  concat.attributes.Set("axis", int64_t{1});
  cases.push_back(concat);
  cases.push_back(
      {"LayerNormalization",
       {{DataType::kFloat32, {2, 8, 16}}, {DataType::kFloat32, {16}}, {DataType::kFloat32, {16}}},
       {}});
  return cases;
}

TEST(CudaKernelsTest, PrepareAgreesWithTheCpuReference) {
  KernelRegistry cuda_registry, cpu_registry;
  ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(&cuda_registry).ok());
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&cpu_registry).ok());
  for (const PrepareCase& c : PrepareCases()) {
    PrepareContext context;
    context.op = c.op;
    context.inputs = c.inputs;
    context.attributes = &c.attributes;
    auto cpu = cpu_registry.Prepare(context);
    auto gpu = cuda_registry.Prepare(context);
    ASSERT_TRUE(cpu.ok()) << c.op << ": " << cpu.status();
    ASSERT_TRUE(gpu.ok()) << c.op << ": " << gpu.status();
    ASSERT_EQ((*gpu)->outputs().size(), (*cpu)->outputs().size()) << c.op;
    for (size_t i = 0; i < (*cpu)->outputs().size(); ++i) {
      EXPECT_EQ((*gpu)->outputs()[i].shape, (*cpu)->outputs()[i].shape) << c.op;
      EXPECT_EQ((*gpu)->outputs()[i].dtype, (*cpu)->outputs()[i].dtype) << c.op;
    }
    EXPECT_EQ((*gpu)->op(), c.op);
  }
}

TEST(CudaKernelsTest, HostRunComputesThroughTheCpuReference) {
  KernelRegistry cuda_registry;
  ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(&cuda_registry).ok());
  std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kFloat32, {3}});
  Attributes attributes;
  attributes.Set("alpha", 2.0f);
  PrepareContext context;
  context.op = "Add";
  context.inputs = inputs;
  context.attributes = &attributes;
  auto kernel = cuda_registry.Prepare(context);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const float a[] = {1, 2, 3}, b[] = {10, 20, 30};
  float out[3] = {};
  const void* in_ptrs[] = {a, b};
  void* out_ptrs[] = {out};
  KernelArgs args;
  args.inputs = in_ptrs;
  args.outputs = out_ptrs;
  ASSERT_TRUE((*kernel)->Run(args).ok());
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{21, 42, 63}));
}

TEST(CudaKernelsTest, UnsupportedTypesAreRefusedAtPrepare) {
  KernelRegistry cuda_registry;
  ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(&cuda_registry).ok());
  std::vector<TensorDesc> inputs(2, TensorDesc{DataType::kInt64, {4}});
  Attributes attributes;
  PrepareContext context;
  context.op = "Mul";
  context.inputs = inputs;
  context.attributes = &attributes;
  auto kernel = cuda_registry.Prepare(context);
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kUnimplemented) << kernel.status();
}

}  // namespace
}  // namespace reprise::runtime
