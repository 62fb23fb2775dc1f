#include "runtime/engine/fusion_qdq.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/fusion_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::CountOps;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;

constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kS8 = onnx::TensorProto::INT8;

void EightBitInit(ModelBuilder& b, const std::string& name, const std::vector<int64_t>& dims,
                  const std::vector<int>& values, int type) {
  auto* init = b.proto().mutable_graph()->add_initializer();
  init->set_name(name);
  init->set_data_type(type);
  for (int64_t d : dims) init->add_dims(d);
  for (int v : values) init->add_int32_data(v);
}

// `in` → QuantizeLinear(scale, zero of `type`) named `name` (its output `name`); returns the
// DequantizeLinear's output.
std::string AddQdq(ModelBuilder& b, const std::string& in, const std::string& name, float scale,
                   int zero, int type) {
  b.FloatInit(name + "_s", {}, {scale});
  EightBitInit(b, name + "_z", {}, {zero}, type);
  b.Node("QuantizeLinear", {in, name + "_s", name + "_z"}, {name});
  b.Node("DequantizeLinear", {name, name + "_s", name + "_z"}, {name + "_dq"});
  return name + "_dq";
}

// Int8 weights of `dims` dequantized with one scale per index of `axis` (or one for the tensor
// when `axis` < 0); returns the DequantizeLinear's output.
std::string AddWeights(ModelBuilder& b, const std::string& name, const std::vector<int64_t>& dims,
                       int axis, uint32_t seed) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-127, 127);
  std::vector<int> w(static_cast<size_t>(count));
  for (int& v : w) v = value(rng);
  const int64_t channels = axis < 0 ? 1 : dims[static_cast<size_t>(axis)];
  const std::vector<float> scales =
      RandomFloats(static_cast<size_t>(channels), seed + 1, 0.004f, 0.012f);
  EightBitInit(b, name + "_q", dims, w, kS8);
  const std::vector<int64_t> param_dims =
      axis < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{channels};
  b.FloatInit(name + "_s", param_dims, scales);
  EightBitInit(b, name + "_z", param_dims, std::vector<int>(static_cast<size_t>(channels), 0), kS8);
  auto& dq = b.Node("DequantizeLinear", {name + "_q", name + "_s", name + "_z"}, {name});
  if (axis >= 0) testing::SetIntAttr(&dq, "axis", axis);
  return name;
}

class FusionQdqTest : public testing::FusionTest {
 protected:
  void SetUp() override { RegisterAllBut({"QLinearConv", "QLinearMatMul"}); }

  // Loads `bytes` with and without the QLinear ops. The outputs are dequantized from the last
  // QuantizeLinear (scale `y_scale`), so they differ by whole steps: at most one step anywhere
  // (the float path rounds the real value computed in float32, the QLinear kernels the exact
  // int32 accumulator and a quantized bias), and on at most 10% of the elements.
  std::shared_ptr<const Model> LoadWithinOneStep(const std::string& bytes, const TensorValue& x,
                                                 float y_scale) {
    std::vector<float> want, got;
    std::shared_ptr<const Model> fused = LoadBoth(bytes, x, &want, &got);
    size_t differ = 0;
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
      EXPECT_LE(std::fabs(got[i] - want[i]), y_scale * 1.001f) << "at " << i;
      if (got[i] != want[i]) ++differ;
    }
    EXPECT_LE(differ * 10, want.size()) << differ << " of " << want.size() << " differ";
    return fused;
  }
};

// x [1,3,8,8] → Q/DQ (uint8) → Conv(3x3, pads 1, per-channel int8 weights, bias) → Relu →
// Q (zero point `y_zero` of `y_type`) → DQ → y.
std::string ConvModel(int y_type, int y_zero, bool relu, bool conv_output_too = false) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8}).Output("y", {1, 4, 8, 8});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  const std::string w = AddWeights(b, "w", {4, 3, 3, 3}, 0, 5);
  b.FloatInit("bias", {4}, RandomFloats(4, 9, -0.3f, 0.3f));
  auto& conv = b.Node("Conv", {xdq, w, "bias"}, {"c"}, "conv");
  testing::SetIntAttr(&conv, "group", 1);
  auto* pads = conv.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int k = 0; k < 4; ++k) pads->add_ints(1);
  std::string last = "c";
  if (relu) {
    b.Node("Relu", {"c"}, {"r"});
    last = "r";
  }
  b.FloatInit("ys", {}, {4.0f / 255});
  EightBitInit(b, "yz", {}, {y_zero}, y_type);
  b.Node("QuantizeLinear", {last, "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  if (conv_output_too) b.Output("c", {1, 4, 8, 8});
  return b.Bytes();
}

TensorValue ConvInput() { return FloatTensor({1, 3, 8, 8}, RandomFloats(192, 21)); }

TEST_F(FusionQdqTest, ConvReluQuantizeBecomesQLinearConv) {
  auto model = LoadWithinOneStep(ConvModel(kU8, 0, /*relu=*/true), ConvInput(), 4.0f / 255);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "QLinearConv"), 1);
  EXPECT_EQ(CountOps(g, "Relu"), 0);
  // Left: x's QuantizeLinear and y's DequantizeLinear.
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 1);
}

TEST_F(FusionQdqTest, SignedOutputReluAtTheLowestZeroPoint) {
  auto model = LoadWithinOneStep(ConvModel(kS8, -128, /*relu=*/true), ConvInput(), 4.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 1);
}

TEST_F(FusionQdqTest, ConvWithoutReluAndAnyZeroPoint) {
  auto model = LoadWithinOneStep(ConvModel(kU8, 100, /*relu=*/false), ConvInput(), 4.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 1);
}

TEST_F(FusionQdqTest, ReluAboveTheLowestZeroPointIsLeftAlone) {
  // y zero point 100: Relu clamps at 100, which QLinearConv cannot do.
  auto model = LoadWithinOneStep(ConvModel(kU8, 100, /*relu=*/true), ConvInput(), 4.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 0);
}

// x → Q/DQ → Conv (1x1) → Clip(0, hi) → Q (uint8, zero point 0, scale `y_scale`) → DQ → y.
std::string ClipModel(float hi, float y_scale) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8}).Output("y", {1, 4, 8, 8});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  b.Node("Conv", {xdq, AddWeights(b, "w", {4, 3, 1, 1}, 0, 15)}, {"c"});
  b.FloatInit("lo", {}, {0.0f}).FloatInit("hi", {}, {hi});
  b.Node("Clip", {"c", "lo", "hi"}, {"r"});
  b.FloatInit("ys", {}, {y_scale});
  EightBitInit(b, "yz", {}, {0}, kU8);
  b.Node("QuantizeLinear", {"r", "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  return b.Bytes();
}

TEST_F(FusionQdqTest, ClipWhoseBoundsQuantizeToTheEndsIsAbsorbed) {
  // Clip(0, 0.4) with y scale 0.4 / 255: Q(0) = 0 and Q(0.4) = 255, so Q(Clip(v)) = Q(v).
  auto model = LoadWithinOneStep(ClipModel(0.4f, 0.4f / 255), ConvInput(), 0.4f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 1);
  EXPECT_EQ(CountOps(model->graph(), "Clip"), 0);
}

TEST_F(FusionQdqTest, ClipInsideTheQuantizedRangeIsLeftAlone) {
  // Clip(0, 0.4) with y scale 0.8 / 255: Q(0.4) = 128, a clamp QLinearConv cannot do.
  auto model = LoadWithinOneStep(ClipModel(0.4f, 0.8f / 255), ConvInput(), 0.8f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 0);
}

TEST_F(FusionQdqTest, ConvOutputWithAnotherReaderIsLeftAlone) {
  auto fused = Model::LoadBytes(ConvModel(kU8, 0, true, /*conv_output_too=*/true), registry_);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(CountOps((*fused)->graph(), "QLinearConv"), 0);
}

TEST_F(FusionQdqTest, NonConstantScaleIsLeftAlone) {
  // The output scale is a graph input.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8})
      .Input("ys", onnx::TensorProto::FLOAT, {})
      .Output("y", {1, 4, 6, 6});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  b.Node("Conv", {xdq, AddWeights(b, "w", {4, 3, 3, 3}, 0, 5)}, {"c"});
  EightBitInit(b, "yz", {}, {0}, kU8);
  b.Node("QuantizeLinear", {"c", "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  auto fused = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(CountOps((*fused)->graph(), "QLinearConv"), 0);
}

TEST_F(FusionQdqTest, WeightsQuantizedAlongTheWrongAxisAreLeftAlone) {
  // Scales along W's input-channel axis: QLinearConv has one per output channel only.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8}).Output("y", {1, 3, 6, 6});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  b.Node("Conv", {xdq, AddWeights(b, "w", {3, 3, 3, 3}, 1, 5)}, {"c"});
  b.FloatInit("ys", {}, {4.0f / 255});
  EightBitInit(b, "yz", {}, {0}, kU8);
  b.Node("QuantizeLinear", {"c", "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  auto model = LoadWithinOneStep(b.Bytes(), ConvInput(), 4.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearConv"), 0);
}

TEST_F(FusionQdqTest, TwoConvsChainInEightBits) {
  // x → conv1 → Relu → Q → DQ → conv2 → Q → DQ → y: both fused, nothing float between.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3, 8, 8}).Output("y", {2, 6, 4, 4});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  b.Node("Conv", {xdq, AddWeights(b, "w1", {8, 3, 1, 1}, 0, 31)}, {"c1"});
  b.Node("Relu", {"c1"}, {"r1"});
  const std::string hdq = AddQdq(b, "r1", "hq", 3.0f / 255, 0, kU8);
  auto& conv2 = b.Node("Conv", {hdq, AddWeights(b, "w2", {6, 4, 3, 3}, -1, 41)}, {"c2"});
  testing::SetIntAttr(&conv2, "group", 2);
  auto* strides = conv2.add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->add_ints(2);
  strides->add_ints(2);
  auto* pads = conv2.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int k = 0; k < 4; ++k) pads->add_ints(1);
  b.FloatInit("ys", {}, {5.0f / 255});
  EightBitInit(b, "yz", {}, {120}, kU8);
  b.Node("QuantizeLinear", {"c2", "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  auto model =
      LoadWithinOneStep(b.Bytes(), FloatTensor({2, 3, 8, 8}, RandomFloats(384, 51)), 5.0f / 255);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "QLinearConv"), 2);
  EXPECT_EQ(g.nodes.size(), 4u);  // Q, QLinearConv, QLinearConv, DQ
}

// x [3,8] → Q/DQ → `op` with int8 weights → Q → DQ → y [3,5].
std::string MatMulModel(const std::string& op, bool trans_b, bool bias) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {3, 8}).Output("y", {3, 5});
  const std::string xdq = AddQdq(b, "x", "xq", 2.0f / 255, 128, kU8);
  const std::vector<int64_t> dims =
      trans_b ? std::vector<int64_t>{5, 8} : std::vector<int64_t>{8, 5};
  const std::string w = AddWeights(b, "w", dims, trans_b ? 0 : 1, 61);
  std::vector<std::string> inputs = {xdq, w};
  if (bias) {
    b.FloatInit("c", {5}, RandomFloats(5, 62));
    inputs.emplace_back("c");
  }
  auto& node = b.Node(op, inputs, {"m"});
  if (trans_b) testing::SetIntAttr(&node, "transB", 1);
  b.FloatInit("ys", {}, {2.0f / 255});
  EightBitInit(b, "yz", {}, {-3}, kS8);
  b.Node("QuantizeLinear", {"m", "ys", "yz"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  return b.Bytes();
}

TensorValue MatMulInput() { return FloatTensor({3, 8}, RandomFloats(24, 71)); }

TEST_F(FusionQdqTest, MatMulBecomesQLinearMatMul) {
  auto model = LoadWithinOneStep(MatMulModel("MatMul", false, false), MatMulInput(), 2.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearMatMul"), 1);
  EXPECT_EQ(CountOps(model->graph(), "MatMul"), 0);
}

TEST_F(FusionQdqTest, GemmWithTransposedWeightsBecomesQLinearMatMul) {
  auto model = LoadWithinOneStep(MatMulModel("Gemm", true, false), MatMulInput(), 2.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearMatMul"), 1);
}

TEST_F(FusionQdqTest, GemmWithBiasIsLeftAlone) {
  // QLinearMatMul has no bias input.
  auto model = LoadWithinOneStep(MatMulModel("Gemm", true, true), MatMulInput(), 2.0f / 255);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "QLinearMatMul"), 0);
}

TEST_F(FusionQdqTest, RegistryWithoutTheQLinearOpsKeepsTheGraph) {
  auto plain = Model::LoadBytes(ConvModel(kU8, 0, true), unfused_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(CountOps((*plain)->graph(), "QLinearConv"), 0);
  EXPECT_EQ(CountOps((*plain)->graph(), "QuantizeLinear"), 1 + 1);
}

}  // namespace
}  // namespace reprise::runtime::engine
