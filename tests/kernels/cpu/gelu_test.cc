// Gelu (gelu.cc) against the exact formulas in double: both forms, in place, odd lengths (the
// vector loop's tail), large magnitudes; tolerance 2e-6 absolute + 1e-5 relative.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/gelu.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

double GeluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

std::vector<float> Inputs() {
  std::vector<float> x = RandomFloats(37, 91, -6.0f, 6.0f);
  for (float v : {0.0f, -0.0f, 1e-6f, -3.0f, 3.0f, -12.0f, 12.0f, -100.0f, 100.0f}) {
    x.push_back(v);
  }
  return x;
}

TEST(GeluTest, BothFormsMatchTheExactFunctions) {
  KernelHarness h;
  const std::vector<float> x = Inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    const bool tanh_form = std::string(approximate) == "tanh";
    auto out = h.Run("Gelu", {Tensor::Of<float>({n}, x)},
                     Attrs({{"approximate", std::string(approximate)}}));
    ASSERT_TRUE(out.ok()) << out.status();
    const auto got = (*out)[0].Values<float>();
    ASSERT_EQ(got.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = tanh_form ? GeluTanh(x[i]) : GeluErf(x[i]);
      EXPECT_NEAR(got[i], want, 2e-6 + 1e-5 * std::fabs(want)) << "x=" << x[i];
    }
  }
}

TEST(GeluTest, DefaultIsErfAndInPlaceWorks) {
  KernelHarness h;
  auto out = h.Run("Gelu", {Tensor::Of<float>({2, 2}, {-1.0f, 0.5f, 1.0f, 2.0f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2}));
  EXPECT_NEAR((*out)[0].Values<float>()[2], 0.8413447, 1e-6);  // 1 * Phi(1)
  std::vector<float> y = Inputs();
  const std::vector<float> x = y;
  Gelu(y.data(), y.data(), static_cast<int64_t>(y.size()), false);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], GeluErf(x[i]), 2e-6 + 1e-5 * std::fabs(GeluErf(x[i])));
  }
}

TEST(GeluTest, RejectsUnknownApproximationAndOtherTypes) {
  KernelHarness h;
  auto bad = h.Run("Gelu", {Tensor::Of<float>({1}, {1.0f})}, Attrs({{"approximate", "fast"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fast"), std::string::npos) << bad.status();
  EXPECT_FALSE(h.Run("Gelu", {Tensor::Of<int32_t>({1}, {1})}).ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
