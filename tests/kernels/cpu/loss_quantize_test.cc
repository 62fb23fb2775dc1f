// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (loss.cc), QuantizeLinear,
// DequantizeLinear and DynamicQuantizeLinear (quantize.cc), on small hand-computed cases.
// Losses within 1e-5 absolute + 1e-5 relative; quantized values exact.
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

// TypeOf knows no int8; an int8 tensor is built by hand.
Tensor Int8s(Shape shape, const std::vector<int8_t>& values) {
  Tensor t = Tensor::Of<int8_t>(std::move(shape), values);
  t.dtype = DataType::kInt8;
  return t;
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

TEST(QuantizeTest, PerTensorRoundsHalfToEvenAndSaturates) {
  KernelHarness h;
  // x / 2 = 0, 0.25, 0.75, 1.25, 1.5, 2.5, -0.5, -1.5, 500, -127, -500; + 128, saturated.
  const Tensor x = Tensor::Of<float>({11}, {0, 0.5f, 1.5f, 2.5f, 3, 5, -1, -3, 1000, -254, -1000});
  auto out =
      h.Run("QuantizeLinear", {x, Tensor::Of<float>({}, {2}), Tensor::Of<uint8_t>({}, {128})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kUInt8);
  EXPECT_EQ((*out)[0].Values<uint8_t>(),
            (std::vector<uint8_t>{128, 128, 129, 129, 130, 130, 128, 126, 255, 1, 0}));
  // int8 zero point -1: -200 and 200 saturate to -128 and 127.
  out = h.Run("QuantizeLinear", {Tensor::Of<float>({6}, {-200, -0.5f, 1.5f, 2.5f, 126.6f, 200}),
                                 Tensor::Of<float>({1}, {1}), Int8s({1}, {-1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kInt8);
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-128, -1, 1, 1, 126, 127}));
  // No zero point: uint8 around 0; opset 10. int32 input.
  out = h.Run("QuantizeLinear",
              {Tensor::Of<float>({4}, {-1, 0.4f, 0.6f, 300}), Tensor::Of<float>({}, {1})}, {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 255}));
  out = h.Run("QuantizeLinear",
              {Tensor::Of<int32_t>({3}, {3, -3, 7}), Tensor::Of<float>({}, {2}), Int8s({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{2, -2, 4}));
}

TEST(QuantizeTest, PerAxis) {
  KernelHarness h;
  // x [2,3,2] along axis 1 with scales [1, 2, 4] and zero points [0, 10, 20]; every slice
  // holds [8, 16].
  std::vector<float> x;
  for (int i = 0; i < 6; ++i) x.insert(x.end(), {8, 16});
  const Tensor scale = Tensor::Of<float>({3}, {1, 2, 4});
  const Tensor zero = Tensor::Of<uint8_t>({3}, {0, 10, 20});
  for (int64_t axis : {int64_t{1}, int64_t{-2}}) {
    auto out = h.Run("QuantizeLinear", {Tensor::Of<float>({2, 3, 2}, x), scale, zero},
                     Attrs({{"axis", axis}}));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].Values<uint8_t>(),
              (std::vector<uint8_t>{8, 16, 14, 18, 22, 24, 8, 16, 14, 18, 22, 24}))
        << axis;
  }
  // Default axis 1; dequantized back with the same parameters.
  auto out = h.Run("DequantizeLinear",
                   {Tensor::Of<uint8_t>({1, 3, 2}, {1, 2, 11, 12, 21, 22}), scale, zero});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {1, 2, 2, 4, 4, 8});
}

TEST(QuantizeTest, Dequantize) {
  KernelHarness h;
  auto out =
      h.Run("DequantizeLinear", {Tensor::Of<uint8_t>({4}, {0, 3, 128, 255}),
                                 Tensor::Of<float>({}, {2}), Tensor::Of<uint8_t>({}, {128})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kFloat32);
  ExpectNear((*out)[0].Values<float>(), {-256, -250, 0, 254});
  out = h.Run("DequantizeLinear",
              {Int8s({3}, {-128, 0, 127}), Tensor::Of<float>({}, {0.5f}), Int8s({}, {-1})});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {-63.5, 0.5, 64});
  out = h.Run("DequantizeLinear",
              {Tensor::Of<int32_t>({2}, {-7, 1 << 30}), Tensor::Of<float>({}, {0.5f})}, {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0].Values<float>(), {-3.5, 536870912.0});
}

TEST(QuantizeTest, ScaleAndZeroPointErrors) {
  KernelHarness h;
  const Tensor x = Tensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto code = [&](const std::string& op, const std::vector<Tensor>& inputs,
                        const runtime::Attributes& attrs,
                        int opset) { return h.Prepare(op, inputs, attrs, opset).status().code(); };
  // Per-axis scale of the wrong length for axis 1 (size 3), or on axis 0 (size 2).
  EXPECT_EQ(code("QuantizeLinear", {x, Tensor::Of<float>({2}, {1, 1})}, {}, 13),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("QuantizeLinear", {x, Tensor::Of<float>({3}, {1, 1, 1})},
                 Attrs({{"axis", int64_t{0}}}), 13),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("QuantizeLinear", {x, Tensor::Of<float>({3}, {1, 1, 1})},
                 Attrs({{"axis", int64_t{2}}}), 13),
            absl::StatusCode::kInvalidArgument);
  // Zero point shape differs from the scale's.
  EXPECT_EQ(code("QuantizeLinear",
                 {x, Tensor::Of<float>({3}, {1, 1, 1}), Tensor::Of<uint8_t>({2}, {0, 0})}, {}, 13),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("DequantizeLinear",
                 {Tensor::Of<uint8_t>({2}, {1, 2}), Tensor::Of<float>({}, {1}),
                  Tensor::Of<uint8_t>({2}, {0, 0})},
                 {}, 13),
            absl::StatusCode::kInvalidArgument);
  // Per-axis before opset 13; 2-D scale.
  EXPECT_EQ(code("QuantizeLinear", {x, Tensor::Of<float>({3}, {1, 1, 1})}, {}, 10),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("QuantizeLinear", {x, Tensor::Of<float>({1, 3}, {1, 1, 1})}, {}, 13),
            absl::StatusCode::kInvalidArgument);
  // Zero point of another type than x.
  EXPECT_EQ(
      code("DequantizeLinear",
           {Tensor::Of<uint8_t>({2}, {1, 2}), Tensor::Of<float>({}, {1}), Int8s({}, {0})}, {}, 13),
      absl::StatusCode::kInvalidArgument);
  // A mismatched scale shape fails at Prepare with a message naming the shapes.
  auto status = h.Prepare("QuantizeLinear", {x, Tensor::Of<float>({4}, {1, 1, 1, 1})}).status();
  EXPECT_NE(status.message().find("[4]"), std::string::npos) << status;
}

TEST(QuantizeTest, DynamicQuantizeLinear) {
  KernelHarness h;
  const auto run = [&](const std::vector<float>& x) {
    return h.Run("DynamicQuantizeLinear", {Tensor::Of<float>({static_cast<int64_t>(x.size())}, x)},
                 {}, 11, 3);
  };
  // Range [0, 255]: scale 1, zero point 0.
  auto out = run({0, 51, 255, 127.5f});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 51, 255, 128}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{1}));
  EXPECT_EQ((*out)[2].Values<uint8_t>(), (std::vector<uint8_t>{0}));
  // Range [-255, 0] (the range always holds 0): scale 1, zero point 255.
  out = run({-255, -100, -0.0f});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 155, 255}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{1}));
  EXPECT_EQ((*out)[2].Values<uint8_t>(), (std::vector<uint8_t>{255}));
  // Range [-3, 2]: scale 5/255, zero point 3 / (5/255) = 153.
  out = run({0, 2, -3, 1});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[1].Values<float>(), {5.0 / 255.0});
  EXPECT_EQ((*out)[2].Values<uint8_t>(), (std::vector<uint8_t>{153}));
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{153, 255, 0, 204}));
  // All zeros: scale 0, everything 0.
  out = run({0, 0});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{0}));
  EXPECT_EQ((*out)[2].Values<uint8_t>(), (std::vector<uint8_t>{0}));
  EXPECT_EQ(
      h.Prepare("DynamicQuantizeLinear", {Tensor::Of<float>({1}, {1})}, {}, 11, 1).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
