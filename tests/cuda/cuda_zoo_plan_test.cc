// The zoo's models planned with the CUDA kernels, without a GPU: every node gets a CUDA kernel
// that accepts its shapes and attributes (Prepare works without a device), and plan-time values
// are folded through the CPU reference.
#include <cstdlib>
#include <string>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/core/cuda/cuda_kernel.h"
#include "runtime/engine/model.h"
#include "runtime/engine/npy.h"

namespace reprise::runtime {
namespace {

std::string SourceDir() { return REPRISE_SOURCE_DIR; }

class CudaZooPlanTest : public ::testing::TestWithParam<std::string> {};

void PlanWithCudaKernels(const std::string& dir) {
  KernelRegistry registry;
  ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(&registry).ok());
  auto model = engine::Model::LoadFile(dir + "/model.onnx", registry);
  ASSERT_TRUE(model.ok()) << model.status();
  auto input = engine::ReadNpyFile(dir + "/input_b1.npy");
  ASSERT_TRUE(input.ok()) << input.status();
  std::vector<engine::NamedTensor> named = {{(*model)->inputs()[0].name, *input}};
  auto inputs = (*model)->MatchInputs(named);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  bool value_keyed = false;
  auto plan = (*model)->PlanForInputs(*inputs, &value_keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE((*plan)->steps().empty());
  for (const auto& step : (*plan)->steps()) {
    EXPECT_NE(dynamic_cast<const cuda::CudaKernel*>(step.kernel), nullptr) << step.op;
  }
}

TEST_P(CudaZooPlanTest, EveryStepIsACudaKernel) {
  PlanWithCudaKernels(SourceDir() + "/tools/models/zoo/" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaZooPlanTest, ::testing::Values("mlp", "transformer"),
                         [](const auto& param_info) { return std::string(param_info.param); });

// Larger models exported into the build tree (the engine_zoo_export test, or REPRISE_ZOO_DIRS):
// planned the same way; skipped when they were not exported.
TEST(CudaZooPlanExportedTest, ResNet18AndMobileNetV2) {
  const char* env = std::getenv("REPRISE_ZOO_DIRS");
  const std::string dirs = env != nullptr ? env : std::string(REPRISE_BINARY_DIR) + "/zoo";
  int checked = 0;
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    for (const char* name : {"resnet18", "mobilenet_v2"}) {
      const std::string path = absl::StrCat(dir, "/", name);
      FILE* file = std::fopen((path + "/model.onnx").c_str(), "rb");
      if (dir.empty() || file == nullptr) continue;
      std::fclose(file);
      SCOPED_TRACE(name);
      PlanWithCudaKernels(path);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no exported resnet18 / mobilenet_v2 under " << dirs;
}

}  // namespace
}  // namespace reprise::runtime
