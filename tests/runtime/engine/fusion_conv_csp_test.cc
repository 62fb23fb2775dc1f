// Convolution chains beyond the plain ones. YOLO's cross-stage-partial blocks: a residual added
// after a convolution's activation (x + SiLU(conv(...))) goes into the fused conv
// (sum_after_activation), and the kernel adds it after the activation; a concatenation of a
// split whose shapes shape inference lost stays in the chain of convolutions. A Resize between
// convolutions, sums of the chain's values, PointNet's pointwise 1-D chains, global poolings
// of the chains' values, and a decoder's ConvTranspose with its normalisation and activation.
// Outputs as the unfused graph's.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/fusion_conv.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/fusion_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using kernels::cpu::kFusedConvOp;
using kernels::cpu::kFusedGlobalAveragePoolOp;
using kernels::cpu::kFusedGlobalMaxPoolOp;
using kernels::cpu::kFusedResizeOp;
using testing::AddConv;
using testing::AddConv1d;
using testing::CountOps;
using testing::ExpectSameOutputs;
using testing::Floats;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;
using testing::SetIntAttr;
using testing::SetIntsAttr;

class FusionConvCspTest : public testing::FusionTest {
 protected:
  void SetUp() override { RegisterAllBut({kFusedConvOp}); }
};

// `in` → `act` ("Silu": x * Sigmoid(x), or a one-input op such as "Relu") → `out`.
void AddActivation(ModelBuilder& b, const std::string& act, const std::string& in,
                   const std::string& out) {
  if (act == "Silu") {
    b.Node("Sigmoid", {in}, {in + "_sig"});
    b.Node("Mul", {in, in + "_sig"}, {out});
  } else {
    b.Node(act, {in}, {out});
  }
}

// `in` [N, C, ...] → BatchNormalization with constant parameters (scale in [0.5, 1.5], var in
// [0.5, 2]) → `out`.
void AddBatchNorm(ModelBuilder& b, const std::string& in, const std::string& out, int64_t channels,
                  uint32_t seed) {
  const size_t n = static_cast<size_t>(channels);
  b.FloatInit(out + "_scale", {channels}, RandomFloats(n, seed, 0.5f, 1.5f));
  b.FloatInit(out + "_b", {channels}, RandomFloats(n, seed + 1));
  b.FloatInit(out + "_mean", {channels}, RandomFloats(n, seed + 2));
  b.FloatInit(out + "_var", {channels}, RandomFloats(n, seed + 3, 0.5f, 2.0f));
  b.Node("BatchNormalization", {in, out + "_scale", out + "_b", out + "_mean", out + "_var"},
         {out});
}

// `in` → AddConv `name` (scaled weights from `seed`) → Relu → AddBatchNorm (from seed + 2) → `out`.
void AddConvReluBatchNorm(ModelBuilder& b, const std::string& name, const std::string& in,
                          const std::string& out, int64_t channels_in, int64_t channels_out,
                          uint32_t seed) {
  AddConv(b, name, in, name + "_out", channels_in, channels_out, seed, /*scaled=*/true);
  b.Node("Relu", {name + "_out"}, {name + "_act"});
  AddBatchNorm(b, name + "_act", out, channels_out, seed + 2);
}

const Node* FindNamed(const Graph& graph, const std::string& name) {
  for (const Node& node : graph.nodes) {
    if (node.name == name) return &node;
  }
  return nullptr;
}

std::string Attr(const Node& node, const char* name) {
  auto s = node.attributes.GetString(name, "");
  return s.ok() ? *s : "error";
}

// A bottleneck y = c(m1(m0(h)) + h) with h = act(a(x)) and each m an activated conv: the Add
// goes into m1 after its activation; h, a convolution's output, stays blocked as m1's residual.
// With 32 channels over 16x16 at batch 2, the 3x3 convolutions are Winograd candidates, whose
// primitive takes no sum at all. Channels of 24 are not whole blocks (zero padding in the
// blocked layout).
TEST_F(FusionConvCspTest, TheResidualAfterTheActivationGoesIntoTheConv) {
  for (const char* act : {"Silu", "Relu"}) {
    for (int64_t c : {32, 24}) {
      SCOPED_TRACE(std::string(act) + " c=" + std::to_string(c));
      ModelBuilder b;
      b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 16, 16}).Output("y", {2, 8, 16, 16});
      AddConv(b, "a", "x", "a_out", 8, c, 11, /*scaled=*/true);
      AddActivation(b, act, "a_out", "h");
      AddConv(b, "m0", "h", "m0_out", c, c, 13, /*scaled=*/true);
      AddActivation(b, act, "m0_out", "m0_act");
      AddConv(b, "m1", "m0_act", "m1_out", c, c, 15, /*scaled=*/true);
      AddActivation(b, act, "m1_out", "m1_act");
      b.Node("Add", {"h", "m1_act"}, {"sum"});
      AddConv(b, "c", "sum", "y", c, 8, 17, /*scaled=*/true);
      auto model =
          LoadBothWithin(b.Bytes(), FloatTensor({2, 8, 16, 16}, RandomFloats(4096, 19)), 1e-4f);
      ASSERT_NE(model, nullptr);
      const Graph& g = model->graph();
      EXPECT_EQ(CountOps(g, kFusedConvOp), 4);
      EXPECT_EQ(CountOps(g, "Add"), 0);
      const Node* m1 = FindNamed(g, "m1");
      ASSERT_NE(m1, nullptr);
      ASSERT_EQ(m1->inputs.size(), 4u);
      EXPECT_EQ(m1->attributes.GetInt("sum_after_activation", 0).value_or(0), 1);
      EXPECT_EQ(Attr(*m1, "r_layout"), "blocked");
      EXPECT_EQ(Attr(*m1, "y_layout"), "blocked");
      // The other convs have no residual.
      for (const char* name : {"a", "m0", "c"}) {
        const Node* node = FindNamed(g, name);
        ASSERT_NE(node, nullptr) << name;
        EXPECT_EQ(node->inputs.size(), 3u) << name;
        EXPECT_FALSE(node->attributes.Has("sum_after_activation")) << name;
      }
    }
  }
}

// The residual stored otherwise than the output: a plain value (a Sigmoid of the input) added
// to a conv whose output stays blocked (reordered to the output's layout before the sum), and
// to one whose output is a graph output (plain, as the residual).
TEST_F(FusionConvCspTest, AResidualStoredOtherwiseIsReorderedBeforeTheSum) {
  for (bool blocked_out : {true, false}) {
    SCOPED_TRACE(blocked_out ? "blocked output" : "graph output");
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2, 16, 16, 16}).Output("y", {2, 16, 16, 16});
    b.Node("Sigmoid", {"x"}, {"r"});
    AddConv(b, "m", "x", "m_out", 16, 16, 23, /*scaled=*/true);
    AddActivation(b, "Silu", "m_out", "m_act");
    b.Node("Add", {"m_act", "r"}, {blocked_out ? "sum" : "y"});
    if (blocked_out) AddConv(b, "c", "sum", "y", 16, 16, 25, /*scaled=*/true);
    auto model =
        LoadBothWithin(b.Bytes(), FloatTensor({2, 16, 16, 16}, RandomFloats(8192, 27)), 1e-4f);
    ASSERT_NE(model, nullptr);
    const Node* m = FindNamed(model->graph(), "m");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->attributes.GetInt("sum_after_activation", 0).value_or(0), 1);
    EXPECT_EQ(Attr(*m, "r_layout"), "");
    EXPECT_EQ(Attr(*m, "y_layout"), blocked_out ? "blocked" : "");
  }
}

// A residual that only broadcasts ([N, C, 1, 1]) after the activation: added after it.
TEST_F(FusionConvCspTest, ABroadcastResidualAfterTheActivation) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 5}).Output("y", {1, 4, 5, 5});
  AddConv(b, "m", "x", "m_out", 4, 4, 31, /*scaled=*/true);
  AddActivation(b, "Silu", "m_out", "m_act");
  auto& mean = b.Node("ReduceMean", {"x"}, {"r"});
  auto* axes = mean.add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(2);
  axes->add_ints(3);
  b.Node("Add", {"m_act", "r"}, {"y"});
  auto model =
      LoadBothWithin(b.Bytes(), FloatTensor({1, 4, 5, 5}, RandomFloats(100, 33, -3, 3)), 1e-4f);
  ASSERT_NE(model, nullptr);
  const Node* m = FindNamed(model->graph(), "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->inputs.size(), 4u);
  EXPECT_EQ(m->attributes.GetInt("sum_after_activation", 0).value_or(0), 1);
  EXPECT_EQ(CountOps(model->graph(), "Add"), 0);
}

// A C2f block as exported from PyTorch: h split in two halves along the channels by Slices whose
// bounds come from Shape(h) (ONNX shape inference gives their outputs no shape), a bottleneck on
// the second half, and Concat(first, second, bottleneck) into a convolution. The concatenation
// is fused (its inputs of unknown shape taken as 4-D float32) and its output stays blocked.
TEST_F(FusionConvCspTest, AConcatenationOfASplitOfUnknownShapeIsFused) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 16, 8, 8}).Output("y", {2, 8, 8, 8});
  AddConv(b, "a", "x", "a_out", 16, 32, 41, /*scaled=*/true);
  AddActivation(b, "Silu", "a_out", "h");
  b.Int64Init("one", {}, {1});
  b.Int64Init("two", {1}, {2});
  b.Int64Init("zero1", {1}, {0});
  b.Int64Init("axis1", {1}, {1});
  b.Int64Init("end", {1}, {int64_t{1} << 40});
  b.Node("Shape", {"h"}, {"h_shape"});
  b.Node("Gather", {"h_shape", "one"}, {"channels"});
  b.Node("Unsqueeze", {"channels", "zero1"}, {"channels1"});
  b.Node("Div", {"channels1", "two"}, {"half"});
  b.Node("Slice", {"h", "zero1", "half", "axis1"}, {"s0"});
  b.Node("Slice", {"h", "half", "end", "axis1"}, {"s1"});
  AddConv(b, "m", "s1", "m_out", 16, 16, 43, /*scaled=*/true);
  AddActivation(b, "Silu", "m_out", "m_act");
  b.Node("Add", {"s1", "m_act"}, {"t"});
  auto& cat = b.Node("Concat", {"s0", "s1", "t"}, {"cat"});
  testing::SetIntAttr(&cat, "axis", 1);
  AddConv(b, "c", "cat", "y", 48, 8, 45, /*scaled=*/true);
  auto model = LoadBothWithin(b.Bytes(), FloatTensor({2, 16, 8, 8}, RandomFloats(2048, 47)), 1e-4f);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "Concat"), 0);
  ASSERT_EQ(CountOps(g, kernels::cpu::kFusedConcatOp), 1);
  for (const Node& node : g.nodes) {
    if (node.op != kernels::cpu::kFusedConcatOp) continue;
    EXPECT_EQ(Attr(node, "y_layout"), "blocked");
    EXPECT_EQ(Attr(node, "x2_layout"), "blocked");  // the bottleneck's conv
  }
}

// A detector's upsampling between convolutions: a Resize of H and W only (scales 1 on N and C),
// nearest or linear, stays in the chain's layout (kFusedResizeOp, both ends blocked). One that
// resizes channels, or rounds with tf_half_pixel_for_nn (which moves an axis of scale 1 with
// nearest_mode ceil), stays a plain Resize. The outputs match the unfused graph's.
TEST_F(FusionConvCspTest, ResizeBetweenConvolutionsKeepsTheChainLayout) {
  struct Case {
    std::vector<float> scales;
    std::string mode, coords;
    bool fused;
  };
  const Case cases[] = {{{1, 1, 2, 2}, "nearest", "asymmetric", true},
                        {{1, 1, 2, 2}, "linear", "half_pixel", true},
                        {{1, 1, 0.5f, 0.5f}, "linear", "align_corners", true},
                        {{1, 2, 2, 2}, "nearest", "asymmetric", false},
                        {{1, 1, 2, 2}, "nearest", "tf_half_pixel_for_nn", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.mode << " " << c.coords << " scale C " << c.scales[1]);
    const int64_t out_c = c.scales[1] == 1 ? 8 : 16;
    const int64_t side = static_cast<int64_t>(8 * c.scales[2]);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 8, 8}).Output("y", {1, 8, side, side});
    AddConv(b, "a", "x", "a_out", 8, 8, 81, true);
    b.FloatInit("scales", {4}, c.scales);
    auto& up = b.Node("Resize", {"a_out", "", "scales"}, {"up_out"}, "up");
    for (const auto& [name, value] : {std::pair<std::string, std::string>{"mode", c.mode},
                                      {"coordinate_transformation_mode", c.coords}}) {
      auto* attr = up.add_attribute();
      attr->set_name(name);
      attr->set_type(onnx::AttributeProto::STRING);
      attr->set_s(value);
    }
    AddConv(b, "b", "up_out", "y", out_c, 8, 83, true);
    const TensorValue x = FloatTensor({1, 8, 8, 8}, RandomFloats(8 * 8 * 8, 85));
    auto model = LoadBothWithin(b.Bytes(), x, 1e-4f);
    ASSERT_NE(model, nullptr);
    const Node* node = FindNamed(model->graph(), "up");
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->op, c.fused ? std::string(kFusedResizeOp) : std::string("Resize"));
    EXPECT_EQ(Attr(*node, "x_layout"), c.fused ? "blocked" : "");
    EXPECT_EQ(Attr(*node, "y_layout"), c.fused ? "blocked" : "");
  }
}

// ConvMixer's residual sums: values that BatchNormalizations (after activations, so that no
// convolution absorbs them) write are added, and their sum and a difference read by a
// convolution. Each becomes a fused sum that reads and writes blocked (the Relu after the sum and
// the SiLU after the difference their activations), so that the chain does not go plain around
// them. Batch 2, 24 channels (a
// partial block), every output as the unfused graph's.
TEST_F(FusionConvCspTest, SumsOfChainValuesKeepTheBlockedLayout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 9, 9}).Output("y", {2, 16, 9, 9});
  AddConvReluBatchNorm(b, "a", "x", "u", 8, 24, 171);
  AddConvReluBatchNorm(b, "m", "u", "v", 24, 24, 177);
  b.Node("Add", {"u", "v"}, {"sum"}, "sum");
  b.Node("Relu", {"sum"}, {"sum_act"});
  b.Node("Sub", {"sum_act", "v"}, {"diff"}, "diff");
  AddActivation(b, "Silu", "diff", "diff_act");
  AddConv(b, "c", "diff_act", "y", 24, 16, 183, true);
  const TensorValue x = FloatTensor({2, 8, 9, 9}, RandomFloats(2 * 8 * 81, 185));
  auto model = LoadBothWithin(b.Bytes(), x, 1e-4f);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedAddOp), 2);
  EXPECT_EQ(CountOps(g, "Relu") + CountOps(g, "Sigmoid") + CountOps(g, "Mul"), 0);
  for (const char* name : {"sum", "diff"}) {
    SCOPED_TRACE(name);
    const Node* node = FindNamed(g, name);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->op, kernels::cpu::kFusedAddOp);
    EXPECT_EQ(Attr(*node, "x0_layout"), "blocked");
    EXPECT_EQ(Attr(*node, "x1_layout"), "blocked");
    EXPECT_EQ(Attr(*node, "y_layout"), "blocked");
    EXPECT_EQ(Attr(*node, "activation"), std::string(name) == "sum" ? "Relu" : "Swish");
    auto subtract = node->attributes.GetInt("subtract", 0);
    ASSERT_TRUE(subtract.ok());
    EXPECT_EQ(*subtract, std::string(name) == "diff" ? 1 : 0);
  }
}

// A BiFPN's sums of a resized value and another of a dynamic batch: ONNX shape inference names
// the Resize's batch afresh ("unk__0"), and the engine learns it is the input's ("N", the scale
// being 1), so that the two shapes are the same and the sum is fused (blocked at both ends);
// so is a second level's, after a sum and a Resize. Outputs as the unfused graph's.
TEST_F(FusionConvCspTest, SumsAcrossResizesOfADynamicBatchAreFused) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 8, 8, 8})
      .Input("z", onnx::TensorProto::FLOAT, {-1, 8, 16, 16})
      .Input("z2", onnx::TensorProto::FLOAT, {-1, 8, 32, 32})
      .Output("y", {-1, 8, 32, 32});
  AddConvReluBatchNorm(b, "a", "x", "u", 8, 8, 201);
  b.FloatInit("scales", {4}, {1, 1, 2, 2});
  b.Node("Resize", {"u", "", "scales"}, {"up"});
  AddConvReluBatchNorm(b, "m", "z", "v", 8, 8, 207);
  b.Node("Add", {"v", "up"}, {"sum"}, "sum");
  // The sum's batch is named afresh too ("unk__1": its inputs' names differed), then the next
  // Resize's ("unk__2"); both are "N" once the sum's inputs are.
  b.FloatInit("scales2", {4}, {1, 1, 2, 2});
  b.Node("Resize", {"sum", "", "scales2"}, {"up2"});
  AddConvReluBatchNorm(b, "n", "z2", "v2", 8, 8, 217);
  b.Node("Add", {"v2", "up2"}, {"sum2"}, "sum2");
  AddConv(b, "c", "sum2", "y", 8, 8, 211, true);
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  auto plain = Model::LoadBytes(b.Bytes(), unfused_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const char* name : {"sum", "sum2"}) {
    SCOPED_TRACE(name);
    const Node* sum = FindNamed((*model)->graph(), name);
    ASSERT_NE(sum, nullptr);
    EXPECT_EQ(sum->op, kernels::cpu::kFusedAddOp);
    EXPECT_EQ(Attr(*sum, "x1_layout"), "blocked");
  }
  const std::vector<NamedTensor> inputs = {
      {"x", FloatTensor({2, 8, 8, 8}, RandomFloats(2 * 8 * 64, 213))},
      {"z", FloatTensor({2, 8, 16, 16}, RandomFloats(2 * 8 * 256, 215))},
      {"z2", FloatTensor({2, 8, 32, 32}, RandomFloats(2 * 8 * 1024, 221))}};
  ExpectSameOutputs(**model, **plain, inputs);
}

// A residual branch's constant scale (Inception-ResNet's 0.17, EDSR's 0.1): a Mul of a 1x1
// conv's output by one value, or by one per channel (either operand order), folds into the
// conv's weights and bias; one that varies along W does not. Outputs computed by hand.
TEST_F(FusionConvCspTest, ConstantScalesFoldIntoTheConv) {
  const int64_t c = 3, m = 2, hw = 4;
  const std::vector<float> w = RandomFloats(m * c, 191), bias = {0.5f, -0.25f};
  const std::vector<float> xs = RandomFloats(c * hw, 193);
  struct Case {
    std::vector<int64_t> shape;
    std::vector<float> values;
    bool conv_first, folded;
  };
  for (const Case& k :
       {Case{{}, {0.17f}, true, true}, Case{{1, m, 1, 1}, {2.0f, -0.5f}, false, true},
        Case{{m, 1, 1}, {0.25f, 3.0f}, true, true},
        Case{{1, 1, 1, 2}, {2.0f, 4.0f}, true, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "scale of " << k.values.size() << " value(s), folded " << k.folded);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, c, 2, 2}).Output("y", {1, m, 2, 2});
    b.FloatInit("w", {m, c, 1, 1}, w).FloatInit("bias", {m}, bias);
    b.FloatInit("s", k.shape, k.values);
    b.Node("Conv", {"x", "w", "bias"}, {"conv"});
    b.Node("Mul",
           k.conv_first ? std::vector<std::string>{"conv", "s"}
                        : std::vector<std::string>{"s", "conv"},
           {"y"});
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    ASSERT_TRUE(model.ok()) << model.status();
    const Graph& g = (*model)->graph();
    EXPECT_EQ(CountOps(g, "Mul") + CountOps(g, kernels::cpu::kFusedChannelScaleOp),
              k.folded ? 0 : 1);
    const std::vector<float> got = Run(*model, FloatTensor({1, c, 2, 2}, xs));
    ASSERT_EQ(got.size(), static_cast<size_t>(m * hw));
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t p = 0; p < hw; ++p) {
        float conv = bias[o];
        for (int64_t j = 0; j < c; ++j) conv += w[o * c + j] * xs[j * hw + p];
        const float scale = k.values.size() == 1  ? k.values[0]
                            : k.shape.back() == 2 ? k.values[p % 2]
                                                  : k.values[o];
        EXPECT_NEAR(got[o * hw + p], conv * scale, 1e-5f) << o << "," << p;
      }
    }
  }
}

// A conv of no output channels followed by a constant scale or a BatchNormalization (a hostile
// model's): nothing is folded (no division by its zero channels), and the empty output comes
// out.
TEST_F(FusionConvCspTest, AConvOfNoOutputChannelsFoldsNothing) {
  for (const bool batch_norm : {false, true}) {
    SCOPED_TRACE(batch_norm ? "BatchNormalization" : "Mul");
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 3, 2, 2}).Output("y", {1, 0, 2, 2});
    b.FloatInit("w", {0, 3, 1, 1}, {});
    b.Node("Conv", {"x", "w"}, {"conv"});
    if (batch_norm) {
      for (const char* name : {"scale", "shift", "mean", "var"}) b.FloatInit(name, {0}, {});
      b.Node("BatchNormalization", {"conv", "scale", "shift", "mean", "var"}, {"y"});
    } else {
      b.FloatInit("s", {}, {0.5f});
      b.Node("Mul", {"conv", "s"}, {"y"});
    }
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    ASSERT_TRUE(model.ok()) << model.status();
    auto out = testing::RunPlan(**model, {{"x", FloatTensor({1, 3, 2, 2}, RandomFloats(12, 197))}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{1, 0, 2, 2}));
  }
}

// PointNet's shared per-point layers: 1-D pointwise convolutions. A value between pointwise
// convolutions only stays blocked (channel blocks, so that the chain's end reorders without a
// transpose); one that a wider convolution reads stays channels-last. The outputs match the
// unfused graph's.
TEST_F(FusionConvCspTest, PointwiseOneDimensionalChainsStayBlocked) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE(batch);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {batch, 8, 129})
        .Output("u", {batch, 4, 17})
        .Output("v", {batch, 4, 16});
    AddConv1d(b, "p", "x", "p_out", 8, 16, 1, 61);  // length 65
    b.Node("Relu", {"p_out"}, {"p_relu"});
    AddConv1d(b, "q", "p_relu", "q_out", 16, 16, 1, 63);  // length 33
    AddConv1d(b, "r", "q_out", "u", 16, 4, 1, 65);        // length 17
    AddConv1d(b, "s", "q_out", "v", 16, 4, 3, 67);        // length 16
    const TensorValue x = FloatTensor({batch, 8, 129}, RandomFloats(batch * 8 * 129, 69));
    auto model = LoadBothWithin(b.Bytes(), x, 1e-4f);
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    ASSERT_EQ(CountOps(g, kFusedConvOp), 4);
    const std::map<std::string, std::pair<std::string, std::string>> want = {
        {"p", {"", "blocked"}},
        {"q", {"blocked", "nhwc"}},
        {"r", {"nhwc", ""}},
        {"s", {"nhwc", ""}}};
    for (const auto& [name, layouts] : want) {
      const Node* node = FindNamed(g, name);
      ASSERT_NE(node, nullptr) << name;
      EXPECT_EQ(Attr(*node, "x_layout"), layouts.first) << name;
      EXPECT_EQ(Attr(*node, "y_layout"), layouts.second) << name;
    }
  }
}

// Global poolings of a chain's value read its layout: PointNet's ReduceMax over its points and a
// 1-D network's ReduceMean over time (axes [2] and [-1], keepdims 0 and 1) of a pointwise 1-D
// convolution (blocked), a GlobalAveragePool of a wider one's (channels-last), and of a 2-D
// convolution's value a GlobalMaxPool and a ReduceMean over [-1, 2] (blocked), all 24 or 20
// channels (a partial block). A ReduceMax of a value that is also a graph output reads it plain.
// A ReduceMax over C and a ReduceMean over W alone stay. Batch 1 and 3; every output as the
// unfused graph's.
TEST_F(FusionConvCspTest, GlobalPoolingsReadTheChainsLayout) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE(batch);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {batch, 8, 129})
        .Input("y", onnx::TensorProto::FLOAT, {batch, 8, 7, 9})
        .Output("u", {batch, 24})
        .Output("v", {batch, 24, 1})
        .Output("w", {batch, 20, 1})
        .Output("m", {batch, 24, 1, 1})
        .Output("r", {batch, 24})
        .Output("co", {batch, 20, 7, 9})
        .Output("cm", {batch, 20, 1, 1})
        .Output("n1", {batch, 1, 7, 9})
        .Output("n2", {batch, 16, 7, 1});
    auto reduce = [&](const std::string& op, const std::string& in, const std::string& out,
                      const std::vector<int64_t>& axes, int64_t keepdims) {
      auto& node = b.Node(op, {in}, {out}, out);
      auto* attr = node.add_attribute();
      attr->set_name("axes");
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t axis : axes) attr->add_ints(axis);
      auto* keep = node.add_attribute();
      keep->set_name("keepdims");
      keep->set_type(onnx::AttributeProto::INT);
      keep->set_i(keepdims);
    };
    AddConv1d(b, "p", "x", "p_out", 8, 24, 1, 71);  // length 65
    b.Node("Relu", {"p_out"}, {"p_relu"});
    AddConv1d(b, "q", "p_relu", "q_out", 24, 24, 1, 73);  // length 33
    reduce("ReduceMax", "q_out", "u", {2}, 0);
    reduce("ReduceMean", "q_out", "v", {-1}, 1);
    AddConv1d(b, "s", "p_relu", "s_out", 24, 20, 3, 75);  // length 32
    b.Node("GlobalAveragePool", {"s_out"}, {"w"}, "w");
    AddConv(b, "a", "y", "a_out", 8, 24, 77, true);
    b.Node("GlobalMaxPool", {"a_out"}, {"m"}, "m");
    reduce("ReduceMean", "a_out", "r", {-1, 2}, 0);
    AddConv(b, "c", "y", "co", 8, 20, 79, true);
    reduce("ReduceMax", "co", "cm", {2, 3}, 1);
    AddConv(b, "d", "y", "d_out", 8, 16, 81, true);
    reduce("ReduceMax", "d_out", "n1", {1}, 1);
    reduce("ReduceMean", "d_out", "n2", {3}, 1);
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    auto plain = Model::LoadBytes(b.Bytes(), unfused_);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(plain.ok()) << plain.status();
    const Graph& g = (*model)->graph();
    EXPECT_EQ(CountOps(g, kFusedGlobalMaxPoolOp), 3);
    EXPECT_EQ(CountOps(g, kFusedGlobalAveragePoolOp), 3);
    EXPECT_EQ(CountOps(g, "ReduceMax"), 1);
    EXPECT_EQ(CountOps(g, "ReduceMean"), 1);
    const std::map<std::string, std::pair<std::string, std::string>> want = {
        {"u", {kFusedGlobalMaxPoolOp, "blocked"}},
        {"v", {kFusedGlobalAveragePoolOp, "blocked"}},
        {"w", {kFusedGlobalAveragePoolOp, "nhwc"}},
        {"m", {kFusedGlobalMaxPoolOp, "blocked"}},
        {"r", {kFusedGlobalAveragePoolOp, "blocked"}},
        {"cm", {kFusedGlobalMaxPoolOp, ""}},
        {"n1", {"ReduceMax", ""}},
        {"n2", {"ReduceMean", ""}}};
    for (const auto& [name, op_layout] : want) {
      const Node* node = FindNamed(g, name);
      ASSERT_NE(node, nullptr) << name;
      EXPECT_EQ(node->op, op_layout.first) << name;
      EXPECT_EQ(Attr(*node, "x_layout"), op_layout.second) << name;
    }
    ExpectSameOutputs(**model, **plain,
                      {{"x", FloatTensor({batch, 8, 129}, RandomFloats(batch * 8 * 129, 83))},
                       {"y", FloatTensor({batch, 8, 7, 9}, RandomFloats(batch * 8 * 63, 85))}});
  }
}

// A decoder's upsampling: ConvTranspose → BatchNormalization → Relu (groups of 2, stride 2,
// bias) and ConvTranspose → Mul by a constant per channel → SiLU (no bias) each become one
// fused ConvTranspose with the normalisation in its weights; a ConvTranspose whose output is
// also a graph output keeps its BatchNormalization and Relu. Outputs, at batch 1 and 3, as the
// same graph's where every ConvTranspose output is also a graph output (nothing folded there).
TEST_F(FusionConvCspTest, ConvTransposeTakesItsNormalisationAndActivation) {
  using kernels::cpu::kFusedConvTransposeOp;
  const auto make = [](bool expose) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 8, 5, 5})
        .Output("y", {-1, 6, 10, 10})
        .Output("y2", {-1, 4, 11, 11})
        .Output("y3", {-1, 4, 10, 10})
        .Output("t3", {-1, 4, 10, 10});
    if (expose) b.Output("t", {-1, 6, 10, 10}).Output("t2", {-1, 4, 11, 11});
    b.FloatInit("w", {8, 3, 4, 4}, RandomFloats(8 * 3 * 16, 31, -0.3f, 0.3f));
    b.FloatInit("bias", {6}, RandomFloats(6, 32));
    auto& up = b.Node("ConvTranspose", {"x", "w", "bias"}, {"t"}, "up");
    SetIntAttr(&up, "group", 2);
    SetIntsAttr(&up, "strides", {2, 2});
    SetIntsAttr(&up, "pads", {1, 1, 1, 1});
    AddBatchNorm(b, "t", "t_bn", 6, 33);
    b.Node("Relu", {"t_bn"}, {"y"});
    b.FloatInit("w2", {8, 4, 3, 3}, RandomFloats(8 * 4 * 9, 37, -0.3f, 0.3f));
    auto& up2 = b.Node("ConvTranspose", {"x", "w2"}, {"t2"}, "up2");
    SetIntsAttr(&up2, "strides", {2, 2});
    b.FloatInit("s2", {1, 4, 1, 1}, RandomFloats(4, 38, 0.5f, 2.0f));
    b.Node("Mul", {"t2", "s2"}, {"t2_scaled"});
    AddActivation(b, "Silu", "t2_scaled", "y2");
    b.FloatInit("w3", {8, 4, 2, 2}, RandomFloats(8 * 4 * 4, 39, -0.3f, 0.3f));
    auto& up3 = b.Node("ConvTranspose", {"x", "w3"}, {"t3"}, "up3");
    SetIntsAttr(&up3, "strides", {2, 2});
    AddBatchNorm(b, "t3", "t3_bn", 4, 40);
    b.Node("Relu", {"t3_bn"}, {"y3"});
    return b.Bytes();
  };
  auto fused = Model::LoadBytes(make(false), registry_);
  auto plain = Model::LoadBytes(make(true), registry_);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Graph& g = (*fused)->graph();
  EXPECT_EQ(CountOps(g, kFusedConvTransposeOp), 2);
  EXPECT_EQ(CountOps(g, "ConvTranspose"), 1);  // up3
  EXPECT_EQ(CountOps(g, "Relu"), 1);
  EXPECT_EQ(CountOps(g, "Sigmoid"), 0);
  EXPECT_EQ(CountOps(g, "Mul"), 0);
  const Node* up = FindNamed(g, "up");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->op, kFusedConvTransposeOp);
  EXPECT_EQ(Attr(*up, "activation"), "Relu");
  EXPECT_NE(g.values[up->inputs[1]].name, "w");  // the folded weights
  const Node* up2 = FindNamed(g, "up2");
  ASSERT_NE(up2, nullptr);
  EXPECT_EQ(Attr(*up2, "activation"), "Swish");
  ASSERT_EQ(up2->inputs.size(), 3u);  // a bias now: the scale's
  EXPECT_EQ(CountOps((*plain)->graph(), kFusedConvTransposeOp), 0);
  for (int64_t n : {1, 3}) {
    SCOPED_TRACE(n);
    ExpectSameOutputs(**fused, **plain,
                      {{"x", FloatTensor({n, 8, 5, 5}, RandomFloats(n * 200, 41))}});
  }
}

}  // namespace
}  // namespace reprise::runtime::engine
