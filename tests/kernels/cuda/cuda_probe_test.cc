#include "kernels/cuda/cuda_probe.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace reprise::kernels::cuda {
namespace {

TEST(CudaProbeTest, AddsOnDevice) {
  std::string why;
  if (DeviceCount(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
  std::vector<float> data = {1, 2, 3};
  ASSERT_EQ(AddOnDevice(data.data(), data.size(), 0.5f), "");
  EXPECT_EQ(data, (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

}  // namespace
}  // namespace reprise::kernels::cuda
