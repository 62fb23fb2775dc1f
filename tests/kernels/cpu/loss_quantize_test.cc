// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (loss.cc) on small hand-computed cases,
// within 1e-5 absolute + 1e-5 relative.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
  }
}

runtime::Attributes Reduction(const std::string& reduction) {
  return Attrs({{"reduction", reduction}});
}

// Input [2,3] of log-probabilities, targets 2 and 0: losses 3 and 4.
Tensor LogProbs() { return Tensor::Of<float>({2, 3}, {-1, -2, -3, -4, -5, -6}); }
Tensor Targets() { return Tensor::Of<int64_t>({2}, {2, 0}); }

TEST(LossTest, NllReductions) {
  KernelHarness h;
  auto out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets()}, Reduction("none"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2}));
  ExpectNear((*out)[0].Values<float>(), {3, 4});
  out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets()}, Reduction("sum"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  ExpectNear((*out)[0].Values<float>(), {7});
  // Mean is the default.
  out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets()});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {3.5});
  // Weights [0.5, 1, 2]: losses 2 * 3 and 0.5 * 4; mean divides by 2 + 0.5.
  const Tensor weight = Tensor::Of<float>({3}, {0.5f, 1, 2});
  out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets(), weight}, Reduction("none"));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {6, 2});
  out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets(), weight});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {3.2});
  // An absent weight is no weight.
  out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets(), Tensor::Absent()},
              Reduction("sum"));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {7});
}

TEST(LossTest, NllIgnoreIndexTypesAndSpatialDims) {
  KernelHarness h;
  // ignore_index 0 drops the second position: loss 0 there, and it does not count in the mean.
  auto out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Targets()},
                   Attrs({{"ignore_index", int64_t{0}}, {"reduction", std::string("none")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {3, 0});
  out = h.Run("NegativeLogLikelihoodLoss",
              {LogProbs(), Targets(), Tensor::Of<float>({3}, {0.5f, 1, 2})},
              Attrs({{"ignore_index", int64_t{0}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {3});  // 2 * 3 / 2
  // An ignore_index outside [0, C) (negative or past the classes) is matched, not refused.
  for (int64_t ignore : {int64_t{-1}, int64_t{7}}) {
    out = h.Run("NegativeLogLikelihoodLoss",
                {LogProbs(), Tensor::Of<int32_t>({2}, {1, static_cast<int32_t>(ignore)})},
                Attrs({{"ignore_index", ignore}, {"reduction", std::string("sum")}}));
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0].Values<float>(), {2});
  }
  // float64, int32 targets.
  out = h.Run(
      "NegativeLogLikelihoodLoss",
      {Tensor::Of<double>({2, 3}, {-1, -2, -3, -4, -5, -6}), Tensor::Of<int32_t>({2}, {1, 2})},
      Reduction("sum"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kFloat64);
  ExpectNear((*out)[0].Values<double>(), {8});
  // [N=1, C=2, d1=2]: x[0, c, d] is c0 = [-1, -2], c1 = [-3, -4]; targets [1, 0] take -3 and -2.
  out = h.Run("NegativeLogLikelihoodLoss",
              {Tensor::Of<float>({1, 2, 2}, {-1, -2, -3, -4}), Tensor::Of<int64_t>({1, 2}, {1, 0})},
              Reduction("none"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2}));
  ExpectNear((*out)[0].Values<float>(), {3, 2});
}

TEST(LossTest, NllErrors) {
  KernelHarness h;
  // A target outside [0, C) that is not ignore_index fails at Run.
  for (int64_t bad : {int64_t{3}, int64_t{-1}}) {
    auto out = h.Run("NegativeLogLikelihoodLoss", {LogProbs(), Tensor::Of<int64_t>({2}, {0, bad})},
                     Attrs({{"ignore_index", int64_t{5}}}));
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  const auto prepare = [&](const std::vector<Tensor>& inputs, const runtime::Attributes& attrs) {
    return h.Prepare("NegativeLogLikelihoodLoss", inputs, attrs).status().code();
  };
  EXPECT_EQ(prepare({LogProbs(), Tensor::Of<int64_t>({3}, {0, 0, 0})}, {}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare({LogProbs(), Targets(), Tensor::Of<float>({2}, {1, 1})}, {}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare({LogProbs(), Targets()}, Reduction("avg")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare({Tensor::Of<float>({3}, {1, 2, 3}), Tensor::Of<int64_t>({}, {0})}, {}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(prepare({LogProbs(), Tensor::Of<float>({2}, {0, 1})}, {}),
            absl::StatusCode::kUnimplemented);
}

TEST(LossTest, SoftmaxCrossEntropy) {
  KernelHarness h;
  const float ln3 = std::log(3.0f);
  // Row 0 [0, 0]: log-probs [-ln2, -ln2]. Row 1 [ln3, 0]: softmax [3/4, 1/4].
  const Tensor x = Tensor::Of<float>({2, 2}, {0, 0, ln3, 0});
  const Tensor y = Tensor::Of<int64_t>({2}, {1, 0});
  const double ln2 = std::log(2.0), ln4_3 = std::log(4.0 / 3.0);
  auto out = h.Run("SoftmaxCrossEntropyLoss", {x, y}, Reduction("none"), 13, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  ExpectNear((*out)[0].Values<float>(), {ln2, ln4_3});
  EXPECT_EQ((*out)[1].shape, (Shape{2, 2}));
  ExpectNear((*out)[1].Values<float>(), {-ln2, -ln2, -ln4_3, -std::log(4.0)});
  // Weights [1, 3]: mean (3 ln2 + ln(4/3)) / 4; without the log_prob output.
  out = h.Run("SoftmaxCrossEntropyLoss", {x, y, Tensor::Of<float>({2}, {1, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  ExpectNear((*out)[0].Values<float>(), {(3 * ln2 + ln4_3) / 4});
  out = h.Run("SoftmaxCrossEntropyLoss", {x, y}, Attrs({{"ignore_index", int64_t{1}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {ln4_3});
  // Classes are strided by the spatial size: [1, 2, 2] with c0 = [0, ln3], c1 = [0, 0].
  out = h.Run("SoftmaxCrossEntropyLoss",
              {Tensor::Of<float>({1, 2, 2}, {0, ln3, 0, 0}), Tensor::Of<int64_t>({1, 2}, {0, 1})},
              Reduction("sum"));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {ln2 + std::log(4.0)});
  // Large logits do not overflow: log(1 + e^-1000) rounds to 0, so the loss is 1000.
  out = h.Run("SoftmaxCrossEntropyLoss",
              {Tensor::Of<double>({1, 2}, {1000, 0}), Tensor::Of<int32_t>({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<double>(), {1000});
  // A bad target fails at Run; three outputs at Prepare.
  EXPECT_EQ(h.Run("SoftmaxCrossEntropyLoss", {x, Tensor::Of<int64_t>({2}, {0, 2})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Prepare("SoftmaxCrossEntropyLoss", {x, y}, {}, 13, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
