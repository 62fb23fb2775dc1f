// MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv (quantized_ops.cc) on small
// hand-computed cases: per-tensor, per-row / per-column and per-output-channel zero points and
// scales, batch broadcasting, a grouped strided dilated convolution, padding, int32 wrap-around,
// round-half-to-even and saturation, and the shapes and types they refuse. Values are exact.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernels/cpu/kernel_test_util.h"

namespace reprise::kernels::cpu::testing {
namespace {

// TypeOf knows no int8; an int8 tensor is built by hand.
Tensor Int8s(Shape shape, const std::vector<int8_t>& values) {
  Tensor t = Tensor::Of<int8_t>(std::move(shape), values);
  t.dtype = DataType::kInt8;
  return t;
}

Tensor U8(Shape shape, const std::vector<uint8_t>& values) {
  return Tensor::Of<uint8_t>(std::move(shape), values);
}

Tensor F32(float value) { return Tensor::Of<float>({}, {value}); }

TEST(MatMulIntegerTest, PerTensorZeroPoints) {
  KernelHarness h;
  const Tensor a = U8({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = U8({3, 2}, {1, 2, 3, 4, 5, 6});
  // A - 1 = [[0,1,2],[3,4,5]], B - 2 = [[-1,0],[1,2],[3,4]].
  auto out = h.Run("MatMulInteger", {a, b, U8({}, {1}), U8({1}, {2})}, {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kInt32);
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{7, 10, 16, 28}));
  // No zero points; an absent a_zero_point with a present b_zero_point.
  out = h.Run("MatMulInteger", {a, b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{22, 28, 49, 64}));
  out = h.Run("MatMulInteger", {a, b, Tensor::Absent(), U8({}, {2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{10, 16, 19, 34}));
}

TEST(MatMulIntegerTest, PerRowAndPerColumnZeroPointsMixedTypes) {
  KernelHarness h;
  // int8 A - [1, 4] per row = [[-2,1],[0,2]]; uint8 B - [1, 2] per column = [[2,0],[4,8]].
  auto out = h.Run("MatMulInteger", {Int8s({2, 2}, {-1, 2, 4, 6}), U8({2, 2}, {3, 2, 5, 10}),
                                     Int8s({2}, {1, 4}), U8({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{0, 8, 8, 16}));
}

TEST(MatMulIntegerTest, BroadcastBatchesWithPerMatrixZeroPoints) {
  KernelHarness h;
  // A [2,1,1,2] (matrices [1,2] and [3,4]) by B [3,2,1] (columns [1,1], [1,0], [0,2]).
  const Tensor a = U8({2, 1, 1, 2}, {1, 2, 3, 4});
  const Tensor b = U8({3, 2, 1}, {1, 1, 1, 0, 0, 2});
  auto out = h.Run("MatMulInteger", {a, b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3, 1, 1}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{3, 1, 4, 7, 3, 8}));
  // One zero point per row of each A matrix [2,1,1,1] = {1, 3}: both become [0, 1]. One per
  // column of each B matrix [3,1,1] = {0, 1, 2}: columns [1,1], [0,-1], [-2,0].
  out = h.Run("MatMulInteger", {a, b, U8({2, 1, 1, 1}, {1, 3}), U8({3, 1, 1}, {0, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{1, -1, 0, 1, -1, 0}));
  // 1-D operands: the added axis is not in the output.
  out = h.Run("MatMulInteger", {U8({3}, {1, 2, 3}), U8({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{22, 28}));
  out = h.Run("MatMulInteger", {U8({2, 3}, {1, 2, 3, 4, 5, 6}), U8({3}, {1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{6, 15}));
}

TEST(MatMulIntegerTest, AccumulatorWrapsLikeInt32) {
  KernelHarness h;
  // 2^17 products of (-128) * (-128) = 2^14 sum to 2^31, which wraps to -2^31.
  const int64_t k = int64_t{1} << 17;
  const std::vector<int8_t> ones(static_cast<size_t>(k), -128);
  auto out = h.Run("MatMulInteger", {Int8s({1, k}, ones), Int8s({k, 1}, ones)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{INT32_MIN}));
}

TEST(MatMulIntegerTest, Refusals) {
  KernelHarness h;
  const Tensor a = U8({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = U8({3, 2}, {1, 2, 3, 4, 5, 6});
  const auto code = [&](const std::vector<Tensor>& inputs) {
    return h.Prepare("MatMulInteger", inputs).status().code();
  };
  // a_zero_point with one per column ([3]) instead of per row ([2]); b_zero_point per row.
  EXPECT_EQ(code({a, b, U8({3}, {0, 0, 0})}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({a, b, U8({}, {0}), U8({3}, {0, 0, 0})}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({a, b, U8({2, 3}, {0, 0, 0, 0, 0, 0})}), absl::StatusCode::kInvalidArgument);
  // A 1-D A has no rows to give zero points to.
  EXPECT_EQ(code({U8({3}, {1, 2, 3}), b, U8({2}, {0, 0})}), absl::StatusCode::kInvalidArgument);
  // Zero point of another type than its operand; float operands; K mismatch.
  EXPECT_EQ(code({a, b, Int8s({}, {0})}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({a, b, Tensor::Absent(), Int8s({}, {0})}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({Tensor::Of<float>({2, 3}, {1, 2, 3, 4, 5, 6}), b}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code({a, U8({2, 2}, {1, 2, 3, 4})}), absl::StatusCode::kInvalidArgument);
  const absl::Status status = h.Prepare("MatMulInteger", {a, b, U8({3}, {0, 0, 0})}).status();
  EXPECT_NE(status.message().find("a_zero_point has shape [3]"), std::string::npos) << status;
}

TEST(QuantizedLinearMatMulTest, RequantizesHalfToEvenAndSaturates) {
  KernelHarness h;
  // a - 2 = [[0,2],[4,6]], b - 1 = [[0,2],[4,6]]: accumulators [[8,12],[24,44]], times
  // 0.5 * 0.25 / y_scale.
  const auto run = [&](float y_scale, const Tensor& y_zero) {
    return h.Run("QLinearMatMul",
                 {U8({2, 2}, {2, 4, 6, 8}), F32(0.5f), U8({}, {2}), U8({2, 2}, {1, 3, 5, 7}),
                  F32(0.25f), U8({}, {1}), F32(y_scale), y_zero},
                 {}, 10);
  };
  // Multiplier 1/8: [1, 1.5, 3, 5.5] rounds half to even to [1, 2, 3, 6].
  auto out = run(1.0f, U8({}, {0}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kUInt8);
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 6}));
  // Multiplier 2: [16, 24, 48, 88] + 100 saturates to int8's 127.
  out = run(0.0625f, Int8s({}, {100}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kInt8);
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{116, 124, 127, 127}));
  // Negative ties: [-5, -15, -25] / 2 = [-2.5, -7.5, -12.5] -> [-2, -8, -12]; 3-D a.
  out = h.Run("QLinearMatMul",
              {Int8s({1, 1, 1}, {-5}), F32(1), Int8s({}, {0}), Int8s({1, 3}, {1, 3, 5}), F32(1),
               Int8s({}, {0}), F32(2), Int8s({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 3}));
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{-2, -8, -12}));
}

TEST(QuantizedLinearMatMulTest, PerRowAndPerColumnScales) {
  KernelHarness h;
  // a - [0, 10] per row = [10, 10], real [10, 20]; b - 1 = [2, 4], real [2, 2] per column.
  auto out = h.Run(
      "QLinearMatMul",
      {U8({2, 1}, {10, 20}), Tensor::Of<float>({2}, {1, 2}), U8({2}, {0, 10}), U8({1, 2}, {3, 5}),
       Tensor::Of<float>({2}, {1, 0.5f}), U8({2}, {1, 1}), F32(1), U8({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{20, 20, 40, 40}));
}

TEST(QuantizedLinearMatMulTest, Refusals) {
  KernelHarness h;
  const auto inputs = [](Tensor a_scale, Tensor b_zero, Tensor y_scale, Tensor y_zero) {
    return std::vector<Tensor>{U8({2, 2}, {2, 4, 6, 8}), std::move(a_scale), U8({}, {2}),
                               U8({2, 2}, {1, 3, 5, 7}), F32(0.25f),         std::move(b_zero),
                               std::move(y_scale),       std::move(y_zero)};
  };
  const auto code = [&](const std::vector<Tensor>& in) {
    return h.Prepare("QLinearMatMul", in, {}, 10).status().code();
  };
  EXPECT_EQ(code(inputs(F32(1), U8({}, {1}), F32(1), U8({}, {0}))), absl::StatusCode::kOk);
  // a_scale per row needs 2 values; y_scale and y_zero_point are one per tensor.
  EXPECT_EQ(code(inputs(Tensor::Of<float>({3}, {1, 1, 1}), U8({}, {1}), F32(1), U8({}, {0}))),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(inputs(F32(1), U8({}, {1}), Tensor::Of<float>({2}, {1, 1}), U8({}, {0}))),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(inputs(F32(1), U8({}, {1}), F32(1), U8({2}, {0, 0}))),
            absl::StatusCode::kInvalidArgument);
  // b_zero_point int8 for a uint8 b; an int32 scale; a missing y_zero_point.
  EXPECT_EQ(code(inputs(F32(1), Int8s({}, {1}), F32(1), U8({}, {0}))),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(inputs(Tensor::Of<int32_t>({}, {1}), U8({}, {1}), F32(1), U8({}, {0}))),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(inputs(F32(1), U8({}, {1}), F32(1), Tensor::Absent())),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConvIntegerTest, PaddingAndZeroPoint) {
  KernelHarness h;
  // x - 1 = [[1,2,3],[4,5,6],[7,8,9]], a 2x2 box filter; padded taps add nothing.
  const Tensor x = U8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  const Tensor w = U8({1, 1, 2, 2}, {1, 1, 1, 1});
  const Tensor x_zero = U8({}, {1});
  auto out = h.Run("ConvInteger", {x, w, x_zero}, {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kInt32);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{12, 16, 24, 28}));
  out = h.Run("ConvInteger", {x, w, x_zero}, Attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ((*out)[0].Values<int32_t>(),
            (std::vector<int32_t>{1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9}));
  // SAME_UPPER pads the end: [[12,16,9],[24,28,15],[15,17,9]].
  out = h.Run("ConvInteger", {x, w, x_zero}, Attrs({{"auto_pad", std::string("SAME_UPPER")}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  // 3-D: the sum of 1..8, less 8 zero points of 1.
  out = h.Run("ConvInteger", {U8({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                              U8({1, 1, 2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1}), x_zero, U8({}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 1, 1, 1, 1}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{28}));
}

TEST(ConvIntegerTest, GroupedStridedDilatedPerChannelZeroPoints) {
  KernelHarness h;
  // x [1,4,5] in two groups of two channels; w [4,2,2], two output channels per group; stride 2
  // and dilation 2 take taps (0, 2) and (2, 4). w_zero_point per output channel [0, 1, 0, 2].
  const Tensor x =
      Int8s({1, 4, 5}, {1, 2, 3, 4, 5, 1, 0, 2, 0, 3, 2, 2, 2, 2, 2, -1, -2, -3, -4, -5});
  const Tensor w = Int8s({4, 2, 2}, {1, 0, 0, 1, 1, 1, 2, 2, 1, 0, 1, 0, 0, 1, 3, 0});
  const runtime::Attributes attrs = Attrs({{"group", int64_t{2}},
                                           {"strides", std::vector<int64_t>{2}},
                                           {"dilations", std::vector<int64_t>{2}},
                                           {"kernel_shape", std::vector<int64_t>{2}}});
  auto out = h.Run("ConvInteger", {x, w, Int8s({}, {0}), Int8s({4}, {0, 1, 0, 2})}, attrs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 4, 2}));
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{3, 6, 3, 5, 1, -1, -1, 1}));
}

TEST(ConvIntegerTest, Refusals) {
  KernelHarness h;
  const Tensor x = U8({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor w = U8({2, 2, 1}, {1, 1, 1, 1});
  const auto code = [&](const std::vector<Tensor>& inputs, const runtime::Attributes& attrs) {
    return h.Prepare("ConvInteger", inputs, attrs).status().code();
  };
  EXPECT_EQ(code({x, w}, {}), absl::StatusCode::kOk);
  // x_zero_point is one per tensor; w_zero_point one per tensor or per output channel (2).
  EXPECT_EQ(code({x, w, U8({2}, {0, 0})}, {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({x, w, U8({}, {0}), U8({3}, {0, 0, 0})}, {}), absl::StatusCode::kInvalidArgument);
  // Zero points of another type than their tensor.
  EXPECT_EQ(code({x, w, Int8s({}, {0})}, {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({x, w, Tensor::Absent(), Int8s({2}, {0, 0})}, {}),
            absl::StatusCode::kInvalidArgument);
  // Group 2 needs w [M, 1, k]; kernel_shape must match w; float x.
  EXPECT_EQ(code({x, w}, Attrs({{"group", int64_t{2}}})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({x, w}, Attrs({{"kernel_shape", std::vector<int64_t>{2}}})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({Tensor::Of<float>({1, 2, 3}, {1, 2, 3, 4, 5, 6}), w}, {}),
            absl::StatusCode::kUnimplemented);
  const absl::Status status =
      h.Prepare("ConvInteger", {x, w, U8({}, {0}), U8({3}, {0, 0, 0})}).status();
  EXPECT_NE(status.message().find("w_zero_point has shape [3]"), std::string::npos) << status;
}

// x [1,1,2,2] uint8 - 10 = [0,10,20,30] (scale 0.5); a 1x1 w [2,1,1,1] int8 [3,-2] less
// per-channel zero points [1,0] = [2,-2], scales [0.25, 1]; bias [10, -20]; y_scale 0.5.
std::vector<Tensor> QLinearConvInputs(Tensor y_zero) {
  return {U8({1, 1, 2, 2}, {10, 20, 30, 40}),
          F32(0.5f),
          U8({}, {10}),
          Int8s({2, 1, 1, 1}, {3, -2}),
          Tensor::Of<float>({2}, {0.25f, 1}),
          Int8s({2}, {1, 0}),
          F32(0.5f),
          std::move(y_zero),
          Tensor::Of<int32_t>({2}, {10, -20})};
}

TEST(QuantizedLinearConvTest, PerChannelScalesBiasRoundingAndSaturation) {
  KernelHarness h;
  // Channel 0: (2x + 10) / 4 = [2.5, 7.5, 12.5, 17.5] -> [2, 8, 12, 18] (half to even).
  // Channel 1: -2x - 20 = [-20, -40, -60, -80].
  auto out = h.Run("QLinearConv", QLinearConvInputs(U8({}, {128})), {}, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kUInt8);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 2, 2}));
  EXPECT_EQ((*out)[0].Values<uint8_t>(),
            (std::vector<uint8_t>{130, 136, 140, 146, 108, 88, 68, 48}));
  // int8 y with zero point -100: channel 1 saturates at -128.
  out = h.Run("QLinearConv", QLinearConvInputs(Int8s({}, {-100})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::kInt8);
  EXPECT_EQ((*out)[0].Values<int8_t>(),
            (std::vector<int8_t>{-98, -92, -88, -82, -120, -128, -128, -128}));
  // Without the bias: channel 0 is 2x / 4 = [0, 5, 10, 15]; channel 1 saturates at 0.
  std::vector<Tensor> inputs = QLinearConvInputs(U8({}, {0}));
  inputs.pop_back();
  out = h.Run("QLinearConv", inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{0, 5, 10, 15, 0, 0, 0, 0}));
}

TEST(QuantizedLinearConvTest, Refusals) {
  KernelHarness h;
  const auto code = [&](const std::vector<Tensor>& inputs) {
    return h.Prepare("QLinearConv", inputs).status().code();
  };
  const auto with = [](size_t index, Tensor t) {
    std::vector<Tensor> inputs = QLinearConvInputs(U8({}, {0}));
    inputs[index] = std::move(t);
    return inputs;
  };
  // A per-channel x_zero_point; w_scale and w_zero_point of 3 for 2 channels; a bias of 3.
  EXPECT_EQ(code(with(2, U8({2}, {10, 10}))), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(with(4, Tensor::Of<float>({3}, {1, 1, 1}))), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(with(5, Int8s({3}, {0, 0, 0}))), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(with(8, Tensor::Of<int32_t>({3}, {0, 0, 0}))), absl::StatusCode::kInvalidArgument);
  // Types: w_zero_point uint8 for an int8 w; a float bias; a missing x_scale.
  EXPECT_EQ(code(with(5, U8({2}, {0, 0}))), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(with(8, Tensor::Of<float>({2}, {0, 0}))), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(with(1, Tensor::Absent())), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reprise::kernels::cpu::testing
