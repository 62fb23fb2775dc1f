#include "runtime/engine/fusion_conv.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/fusion_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using kernels::cpu::kFusedConvOp;
using testing::AddConv;
using testing::AddConv1d;
using testing::CountOps;
using testing::ExpectSameOutputs;
using testing::Floats;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;

const Node* FindNamed(const Graph& graph, absl::string_view name) {
  for (const Node& node : graph.nodes) {
    if (node.name == name) return &node;
  }
  return nullptr;
}

const Node* FindOp(const Graph& graph, absl::string_view op) {
  for (const Node& node : graph.nodes) {
    if (node.op == op) return &node;
  }
  return nullptr;
}

std::string StringAttr(const Node& node, absl::string_view name) {
  auto value = node.attributes.GetString(name, "");
  return value.ok() ? *value : "error";
}

class FusionConvTest : public testing::FusionTest {
 protected:
  void SetUp() override { RegisterAllBut({kFusedConvOp}); }

  std::shared_ptr<const Model> LoadBoth(const std::string& bytes, const TensorValue& x,
                                        std::shared_ptr<const Model>* unfused = nullptr) {
    return LoadBothWithin(bytes, x, 1e-4f, unfused);
  }
};

// `out` = ReduceMean(`in`) over H and W: [N,C,1,1], a residual that only broadcasts.
void AddMeanOverHw(ModelBuilder& b, const std::string& in, const std::string& out) {
  auto& mean = b.Node("ReduceMean", {in}, {out});
  auto* axes = mean.add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(2);
  axes->add_ints(3);
}

TEST_F(FusionConvTest, ResidualBlockFusesAndKeepsBlockedLayout) {
  // conv a → relu → conv b → add(x0) → relu → conv c: a residual block between convolutions.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 6, 6}).Output("y", {1, 8, 6, 6});
  AddConv(b, "a", "x", "a_out", 8, 8, 1);
  b.Node("Relu", {"a_out"}, {"a_relu"});
  AddConv(b, "b", "a_relu", "b_out", 8, 8, 3);
  b.Node("Add", {"b_out", "a_relu"}, {"sum"});
  b.Node("Relu", {"sum"}, {"block"});
  AddConv(b, "c", "block", "y", 8, 8, 5);
  const TensorValue x = FloatTensor({1, 8, 6, 6}, RandomFloats(8 * 36, 7));
  std::shared_ptr<const Model> plain;
  auto model = LoadBoth(b.Bytes(), x, &plain);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(CountOps(g, kFusedConvOp), 3);
  EXPECT_EQ(CountOps(g, "Add") + CountOps(g, "Relu"), 0);
  // b carries the residual (a_relu) and both activations are in the convs.
  EXPECT_EQ(g.nodes[1].inputs.size(), 4u);
  EXPECT_EQ(StringAttr(g.nodes[0], "activation"), "Relu");
  EXPECT_EQ(StringAttr(g.nodes[1], "activation"), "Relu");
  EXPECT_EQ(StringAttr(g.nodes[2], "activation"), "");
  // a's output feeds b (as X and as residual): blocked; y is a graph output: plain.
  EXPECT_EQ(StringAttr(g.nodes[0], "y_layout"), "blocked");
  EXPECT_EQ(StringAttr(g.nodes[1], "x_layout"), "blocked");
  EXPECT_EQ(StringAttr(g.nodes[1], "r_layout"), "blocked");
  EXPECT_EQ(StringAttr(g.nodes[1], "y_layout"), "blocked");
  EXPECT_EQ(StringAttr(g.nodes[2], "x_layout"), "blocked");
  EXPECT_EQ(StringAttr(g.nodes[2], "y_layout"), "");
  // Without the fused op nothing is rewritten.
  EXPECT_EQ(CountOps(plain->graph(), "Conv"), 3);
  EXPECT_EQ(CountOps(plain->graph(), "Relu"), 2);
}

TEST_F(FusionConvTest, BlockedChainsWithPaddedChannelsAndWinogradMatchThePlainGraph) {
  // 24 channels are padded to a whole block (32 with 16-float blocks) between the convs; the
  // kernels report the padded size and the planner sizes the buffers by it. 16x16 outputs at
  // batch 2 make the 3x3 convs Winograd candidates.
  for (int64_t channels : {24, 32}) {
    SCOPED_TRACE(channels);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 16, 16}).Output("y", {2, 8, 16, 16});
    AddConv(b, "a", "x", "a_out", 8, channels, 31, true);
    b.Node("Relu", {"a_out"}, {"a_relu"});
    AddConv(b, "b", "a_relu", "b_out", channels, channels, 33, true);
    b.Node("Add", {"b_out", "a_relu"}, {"sum"});
    AddConv(b, "c", "sum", "c_out", channels, channels, 35, true);
    AddConv(b, "d", "c_out", "y", channels, 8, 37, true);
    const TensorValue x = FloatTensor({2, 8, 16, 16}, RandomFloats(2 * 8 * 256, 39));
    auto model = LoadBoth(b.Bytes(), x);
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    ASSERT_EQ(g.nodes.size(), 4u);
    EXPECT_EQ(StringAttr(g.nodes[0], "x_layout"), "");
    EXPECT_EQ(StringAttr(g.nodes[0], "y_layout"), "blocked");
    EXPECT_EQ(StringAttr(g.nodes[1], "r_layout"), "blocked");
    EXPECT_EQ(StringAttr(g.nodes[3], "x_layout"), "blocked");
    EXPECT_EQ(StringAttr(g.nodes[3], "y_layout"), "");
  }
}

// A speech front end's 1-D convolutions: a value that only 1-D convs read (as X or as the
// residual) stays channels-last between them, as convolutions wider than 1 write or read each;
// one that anything else reads (here a Neg) or that is a graph output stays plain. The outputs
// match the unfused graph's.
TEST_F(FusionConvTest, OneDimensionalConvChainsKeepTheirLayout) {
  for (int64_t batch : {1, 2}) {
    SCOPED_TRACE(batch);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {batch, 3, 203})
        .Output("y", {batch, 24, 24})
        .Output("t", {batch, 24, 100});
    AddConv1d(b, "a", "x", "a_out", 3, 24, 5, 41);  // length 100
    b.Node("Relu", {"a_out"}, {"a_relu"});
    b.Node("Neg", {"a_relu"}, {"t"});
    AddConv1d(b, "b", "a_relu", "b_out", 24, 24, 2, 43);  // length 50
    b.Node("Relu", {"b_out"}, {"b_relu"});
    AddConv1d(b, "c", "b_relu", "c_out", 24, 24, 3, 45);  // length 24
    AddConv1d(b, "d", "b_relu", "d_out", 24, 24, 3, 47);
    b.Node("Add", {"c_out", "d_out"}, {"cd"});
    b.FloatInit("e_w", {24, 24, 1}, RandomFloats(24 * 24, 49, -0.2f, 0.2f));
    b.Node("Conv", {"cd", "e_w"}, {"y"}, "e");
    const TensorValue x = FloatTensor({batch, 3, 203}, RandomFloats(batch * 3 * 203, 51));
    auto model = LoadBoth(b.Bytes(), x);
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    EXPECT_EQ(CountOps(g, kFusedConvOp), 5);  // the Add went into c or d as its residual
    EXPECT_EQ(CountOps(g, "Add") + CountOps(g, "Relu"), 0);
    int blocked = 0;
    for (const Node& node : g.nodes) {
      if (node.op != kFusedConvOp) continue;
      const std::string y = StringAttr(node, "y_layout");
      if (node.name == "a" || node.name == "e") {
        EXPECT_EQ(y, "") << node.name;
      } else {
        EXPECT_EQ(y, "nhwc") << node.name;
        EXPECT_EQ(StringAttr(node, "x_layout"), node.name == "b" ? "" : "nhwc") << node.name;
        ++blocked;
      }
      if (node.inputs.size() == 4) {
        EXPECT_EQ(StringAttr(node, "r_layout"), "nhwc");
      }
    }
    EXPECT_EQ(blocked, 3);  // b, c and d
    const Node* e = FindNamed(g, "e");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(StringAttr(*e, "x_layout"), "nhwc");
  }
}

// ResNet's stem: conv → relu → MaxPool(3x3/2, pad 1) → a residual block. The pooling reads and
// writes the blocked layout (no reorder around it); with ceil_mode too.
TEST_F(FusionConvTest, MaxPoolBetweenConvsKeepsTheBlockedLayout) {
  for (int64_t ceil_mode : {0, 1}) {
    SCOPED_TRACE(ceil_mode);
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2, 3, 15, 15}).Output("y", {2, 8, 8, 8});
    AddConv(b, "stem", "x", "stem_out", 3, 24, 41, true);
    b.Node("Relu", {"stem_out"}, {"stem_relu"});
    auto& pool = b.Node("MaxPool", {"stem_relu"}, {"pooled"});
    auto add_ints = [&pool](const std::string& name, std::vector<int64_t> values) {
      auto* a = pool.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : values) a->add_ints(v);
    };
    add_ints("kernel_shape", {3, 3});
    add_ints("strides", {2, 2});
    add_ints("pads", {1, 1, 1, 1});
    auto* ceil = pool.add_attribute();
    ceil->set_name("ceil_mode");
    ceil->set_type(onnx::AttributeProto::INT);
    ceil->set_i(ceil_mode);
    AddConv(b, "b1", "pooled", "b1_out", 24, 24, 43, true);
    b.Node("Add", {"b1_out", "pooled"}, {"sum"});
    AddConv(b, "last", "sum", "y", 24, 8, 45, true);
    const TensorValue x = FloatTensor({2, 3, 15, 15}, RandomFloats(2 * 3 * 225, 47));
    auto model = LoadBoth(b.Bytes(), x);
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    const Node* fused = FindOp(g, kernels::cpu::kFusedMaxPoolOp);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(CountOps(g, "MaxPool"), 0);
    EXPECT_EQ(StringAttr(*fused, "x_layout"), "blocked");
    EXPECT_EQ(StringAttr(*fused, "y_layout"), "blocked");
  }
}

TEST_F(FusionConvTest, MaxPoolNotFedByAConvOrWithIndicesIsLeftAlone) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 8, 8})
      .Output("y", {1, 4, 4, 4})
      .Output("indices", {1, 4, 4, 4}, onnx::TensorProto::INT64);
  AddConv(b, "a", "x", "a_out", 4, 4, 51);
  // Indices used: stays a MaxPool.
  auto& pool = b.Node("MaxPool", {"a_out"}, {"pooled", "indices"});
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = pool.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
  }
  b.Node("Relu", {"pooled"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 8, 8}, RandomFloats(256, 53)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "MaxPool"), 1);
  EXPECT_EQ(FindOp(model->graph(), kernels::cpu::kFusedMaxPoolOp), nullptr);
}

// `name` = Conv(in) with constant weights [c_out, c_in / group, k, k], bias, the given stride
// and pads, weights in ±1/sqrt(fan-in).
void AddConvK(ModelBuilder& b, const std::string& name, const std::string& in,
              const std::string& out, int64_t c_in, int64_t c_out, int64_t k, int64_t group,
              int64_t stride, int64_t pad, uint32_t seed) {
  const int64_t fan_in = c_in / group * k * k;
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  b.FloatInit(name + "_w", {c_out, c_in / group, k, k},
              RandomFloats(c_out * fan_in, seed, -bound, bound));
  b.FloatInit(name + "_b", {c_out}, RandomFloats(c_out, seed + 1));
  auto& node = b.Node("Conv", {in, name + "_w", name + "_b"}, {out}, name);
  auto ints = [&node](const char* attr, std::vector<int64_t> values) {
    auto* a = node.add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  };
  ints("pads", {pad, pad, pad, pad});
  ints("strides", {stride, stride});
  auto* g = node.add_attribute();
  g->set_name("group");
  g->set_type(onnx::AttributeProto::INT);
  g->set_i(group);
}

// Inception's pooling branch: conv → AveragePool(3x3/1, pad 1, padding counted) → conv stays
// blocked; an AveragePool with ceil_mode (divides otherwise) and one with a pad as wide as its
// window are left alone. Outputs as the unfused graph's, batch 2.
TEST_F(FusionConvTest, AveragePoolBetweenConvsKeepsTheBlockedLayout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 10, 10})
      .Output("y", {2, 8, 10, 10})
      .Output("z", {2, 16, 6, 6})
      .Output("w", {2, 16, 13, 13});
  AddConvK(b, "a", "x", "a_out", 8, 16, 3, 1, 1, 1, 101);
  auto pool = [&b](const std::string& in, const std::string& out, int64_t k, int64_t s, int64_t pad,
                   int64_t ceil_mode, int64_t include_pad) {
    auto& node = b.Node("AveragePool", {in}, {out});
    auto ints = [&node](const char* name, std::vector<int64_t> values) {
      auto* a = node.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : values) a->add_ints(v);
    };
    ints("kernel_shape", {k, k});
    ints("strides", {s, s});
    ints("pads", {pad, pad, pad, pad});
    for (auto [name, value] : {std::pair<const char*, int64_t>{"ceil_mode", ceil_mode},
                               std::pair<const char*, int64_t>{"count_include_pad", include_pad}}) {
      auto* a = node.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(value);
    }
  };
  pool("a_out", "pooled", 3, 1, 1, 0, 1);
  AddConvK(b, "b", "pooled", "y", 16, 8, 1, 1, 1, 0, 103);
  pool("a_out", "z", 3, 2, 1, 1, 1);  // ceil_mode: left alone
  pool("a_out", "w", 2, 1, 2, 0, 0);  // a pad as wide as the window: left alone
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 10, 10}, RandomFloats(1600, 105)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedAveragePoolOp), 1);
  EXPECT_EQ(CountOps(g, "AveragePool"), 2);
  const Node* fused = FindOp(g, kernels::cpu::kFusedAveragePoolOp);
  ASSERT_NE(fused, nullptr);
  // a_out is also read by the plain pools: it stays plain; the fused pool's output is blocked.
  EXPECT_EQ(StringAttr(*fused, "x_layout"), "");
  EXPECT_EQ(StringAttr(*fused, "y_layout"), "blocked");
}

// Zero Pads before an AveragePool (Inception's pooling branch after a max pooling, DenseNet's
// transitions, a pad of nothing) and before a Conv (asymmetric) fold into their pads; a Pad of
// another value, one of the channel axis and a reflecting one are left alone. Every output equals
// that of the same graph whose Pads are also graph outputs (so none folds), batch 2.
TEST_F(FusionConvTest, ZeroPadsFoldIntoConvolutionsAndAveragePools) {
  struct PadSpec {
    std::string in, out;
    std::vector<int64_t> pads;
    std::vector<int64_t> padded;
    const char* mode;
    bool value;
  };
  const std::vector<PadSpec> pad_specs = {
      {"m_out", "p1", {0, 0, 1, 1, 0, 0, 1, 1}, {2, 16, 12, 12}, "constant", false},
      {"a_out", "p0", {0, 0, 0, 0, 0, 0, 0, 0}, {2, 16, 10, 10}, "constant", false},
      {"x", "p2", {0, 0, 2, 1, 0, 0, 0, 1}, {2, 8, 12, 12}, "constant", false},
      {"a_out", "pv", {0, 0, 1, 1, 0, 0, 1, 1}, {2, 16, 12, 12}, "constant", true},
      {"a_out", "pc", {0, 1, 0, 0, 0, 1, 0, 0}, {2, 18, 10, 10}, "constant", false},
      {"a_out", "pr", {0, 0, 1, 1, 0, 0, 1, 1}, {2, 16, 12, 12}, "reflect", false},
  };
  auto build = [&](bool observe_pads) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 10, 10})
        .Output("y", {2, 8, 10, 10})
        .Output("t", {2, 16, 5, 5})
        .Output("u", {2, 4, 12, 12})
        .Output("v", {2, 16, 10, 10})
        .Output("w", {2, 18, 8, 8})
        .Output("r", {2, 16, 10, 10});
    AddConvK(b, "a", "x", "a_out", 8, 16, 3, 1, 1, 1, 111);
    auto& max_pool = b.Node("MaxPool", {"a_out"}, {"m_out"});
    for (const char* name : {"kernel_shape", "pads"}) {
      auto* a = max_pool.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      for (int i = 0; i < (name[0] == 'k' ? 2 : 4); ++i) a->add_ints(name[0] == 'k' ? 3 : 1);
    }
    b.FloatInit("one_and_a_half", {}, {1.5f});
    for (const PadSpec& spec : pad_specs) {
      b.Int64Init(spec.out + "_pads", {8}, spec.pads);
      std::vector<std::string> inputs = {spec.in, spec.out + "_pads"};
      if (spec.value) inputs.push_back("one_and_a_half");
      auto& pad = b.Node("Pad", inputs, {spec.out});
      auto* mode = pad.add_attribute();
      mode->set_name("mode");
      mode->set_type(onnx::AttributeProto::STRING);
      mode->set_s(spec.mode);
      if (observe_pads) b.Output(spec.out, spec.padded);
    }
    auto pool = [&b](const std::string& in, const std::string& out, int64_t k, int64_t s) {
      auto& node = b.Node("AveragePool", {in}, {out});
      for (const char* name : {"kernel_shape", "strides"}) {
        auto* a = node.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INTS);
        a->add_ints(name[0] == 'k' ? k : s);
        a->add_ints(name[0] == 'k' ? k : s);
      }
    };
    pool("p1", "pooled", 3, 1);
    AddConvK(b, "b", "pooled", "y", 16, 8, 1, 1, 1, 0, 113);
    pool("p0", "t", 2, 2);
    AddConvK(b, "c", "p2", "u", 8, 4, 3, 1, 1, 1, 115);
    pool("pv", "v", 3, 1);
    pool("pc", "w", 3, 1);
    pool("pr", "r", 3, 1);
    return b.Bytes();
  };
  auto folded = Model::LoadBytes(build(false), registry_);
  auto kept = Model::LoadBytes(build(true), registry_);
  ASSERT_TRUE(folded.ok()) << folded.status();
  ASSERT_TRUE(kept.ok()) << kept.status();
  const Graph& g = (*folded)->graph();
  EXPECT_EQ(CountOps(g, "Pad"), 3);
  EXPECT_EQ(CountOps((*kept)->graph(), "Pad"), 6);
  // Both pools after a conv's output (the Inception one after a max pooling) join the chain;
  // the Inception one counts its padding, and reads the max pooling's output blocked.
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedMaxPoolOp), 1);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedAveragePoolOp), 2);
  for (const Node& node : g.nodes) {
    if (node.op != kernels::cpu::kFusedAveragePoolOp) continue;
    auto pads = node.attributes.GetInts("pads", {});
    ASSERT_TRUE(pads.ok());
    const bool inception = node.outputs[0] != g.outputs[1].value;
    EXPECT_EQ(*pads, inception ? std::vector<int64_t>({1, 1, 1, 1}) : std::vector<int64_t>(4, 0));
    if (inception) {
      EXPECT_EQ(StringAttr(node, "x_layout"), "blocked");
    }
    auto counted = node.attributes.GetInt("count_include_pad", 0);
    ASSERT_TRUE(counted.ok());
    EXPECT_EQ(*counted, 1);
  }
  const Node* c = FindNamed(g, "c");
  ASSERT_NE(c, nullptr);
  auto conv_pads = c->attributes.GetInts("pads", {});
  ASSERT_TRUE(conv_pads.ok());
  EXPECT_EQ(*conv_pads, std::vector<int64_t>({3, 2, 1, 2}));
  ExpectSameOutputs(**folded, **kept,
                    {{"x", FloatTensor({2, 8, 10, 10}, RandomFloats(1600, 117))}});
}

// Squeeze-and-excitation blocks: conv → GlobalAveragePool → 1x1 convs → Sigmoid → Mul by the
// conv's output → conv. The global average and the scale read the conv's output blocked and
// the scale writes blocked (24 channels: a partial block); a scale by a constant [C,1,1] with
// the operands swapped too; a head's global average after a conv. A Mul by a per-pixel gate
// ([N,1,H,W]) is left alone. Batch 2; every output as the unfused graph's.
TEST_F(FusionConvTest, SqueezeExciteKeepsTheBlockedLayout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 24, 10, 10})
      .Output("y", {2, 16, 10, 10})
      .Output("z", {2, 16, 10, 10})
      .Output("v", {2, 16})
      .Output("w", {2, 24, 10, 10});
  AddConvK(b, "a", "x", "a_out", 24, 24, 3, 1, 1, 1, 121);
  b.Node("GlobalAveragePool", {"a_out"}, {"squeezed"});
  AddConvK(b, "se1", "squeezed", "se1_out", 24, 8, 1, 1, 1, 0, 123);
  b.Node("Relu", {"se1_out"}, {"se1_relu"});
  AddConvK(b, "se2", "se1_relu", "se2_out", 8, 24, 1, 1, 1, 0, 125);
  b.Node("Sigmoid", {"se2_out"}, {"gate"});
  b.Node("Mul", {"a_out", "gate"}, {"excited"});
  AddConvK(b, "b", "excited", "y", 24, 16, 1, 1, 1, 0, 127);
  b.FloatInit("channel_scale", {24, 1, 1}, RandomFloats(24, 129));
  b.Node("Mul", {"channel_scale", "a_out"}, {"scaled"});
  AddConvK(b, "d", "scaled", "z", 24, 16, 1, 1, 1, 0, 131);
  AddConvK(b, "h", "excited", "h_out", 24, 16, 3, 1, 1, 1, 133);
  b.Node("GlobalAveragePool", {"h_out"}, {"pooled"});
  b.Node("Flatten", {"pooled"}, {"v"});
  AddConvK(b, "f", "x", "f_out", 24, 24, 1, 1, 1, 0, 135);
  AddConvK(b, "e", "x", "e_out", 24, 1, 1, 1, 1, 0, 137);
  b.Node("Sigmoid", {"e_out"}, {"pixel_gate"});
  b.Node("Mul", {"f_out", "pixel_gate"}, {"w"});
  std::shared_ptr<const Model> plain;
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 24, 10, 10}, RandomFloats(4800, 139)), &plain);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedGlobalAveragePoolOp), 2);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedChannelScaleOp), 2);
  EXPECT_EQ(CountOps(g, "Mul"), 1);
  EXPECT_EQ(StringAttr(*FindNamed(g, "a"), "y_layout"), "blocked");
  for (const Node& node : g.nodes) {
    if (node.op == kernels::cpu::kFusedGlobalAveragePoolOp) {
      EXPECT_EQ(StringAttr(node, "x_layout"), "blocked");
    }
    if (node.op == kernels::cpu::kFusedChannelScaleOp) {
      EXPECT_EQ(StringAttr(node, "x_layout"), "blocked");
      EXPECT_EQ(StringAttr(node, "y_layout"), "blocked");
      EXPECT_EQ(node.inputs[0], FindNamed(g, "a")->outputs[0]);  // the chain's value first
    }
  }
  ExpectSameOutputs(*model, *plain, {{"x", FloatTensor({2, 24, 10, 10}, RandomFloats(4800, 141))}});
}

// DenseNet's layer: a concatenation of convolutions → BatchNormalization → Relu → conv. The
// BatchNormalization and its Relu become one channel scale that reads and writes blocked, so
// the concatenation stays blocked too; one whose mean is not a constant (after a conv), and
// one of a graph input, are left alone. Batch 2, 24 + 16 channels (a partial block); every
// output as the unfused graph's.
TEST_F(FusionConvTest, BatchNormAfterAConcatenationKeepsTheBlockedLayout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 9, 9})
      .Input("mean", onnx::TensorProto::FLOAT, {40})
      .Output("y", {2, 16, 9, 9})
      .Output("z", {2, 40, 9, 9})
      .Output("w", {2, 8, 9, 9});
  AddConvK(b, "a", "x", "a_out", 8, 24, 3, 1, 1, 1, 151);
  AddConvK(b, "c", "x", "c_out", 8, 16, 1, 1, 1, 0, 153);
  auto& cat = b.Node("Concat", {"a_out", "c_out"}, {"cat"});
  auto* axis = cat.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  auto bn = [&b](const std::string& in, const std::string& out, int64_t channels, uint32_t seed,
                 const std::string& mean) {
    b.FloatInit(out + "_scale", {channels}, RandomFloats(channels, seed, 0.5f, 1.5f));
    b.FloatInit(out + "_b", {channels}, RandomFloats(channels, seed + 1));
    if (mean.empty()) b.FloatInit(out + "_mean", {channels}, RandomFloats(channels, seed + 2));
    b.FloatInit(out + "_var", {channels}, RandomFloats(channels, seed + 3, 0.5f, 2.0f));
    b.Node("BatchNormalization",
           {in, out + "_scale", out + "_b", mean.empty() ? out + "_mean" : mean, out + "_var"},
           {out});
  };
  bn("cat", "normed", 40, 155, "");
  b.Node("Relu", {"normed"}, {"activated"});
  AddConvK(b, "d", "activated", "y", 40, 16, 1, 1, 1, 0, 157);
  AddConvK(b, "e", "x", "e_out", 8, 40, 1, 1, 1, 0, 159);
  bn("e_out", "z", 40, 161, "mean");  // a mean that is an input: left alone
  bn("x", "w", 8, 163, "");           // of a graph input: left alone
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  auto plain = Model::LoadBytes(b.Bytes(), unfused_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Graph& g = (*model)->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedChannelScaleOp), 1);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedConcatOp), 1);
  EXPECT_EQ(CountOps(g, "BatchNormalization"), 2);
  EXPECT_EQ(CountOps(g, "Relu"), 0);
  const Node* scale = FindOp(g, kernels::cpu::kFusedChannelScaleOp);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(StringAttr(*scale, "activation"), "Relu");
  EXPECT_EQ(scale->inputs.size(), 3u);
  EXPECT_EQ(StringAttr(*scale, "x_layout"), "blocked");
  EXPECT_EQ(StringAttr(*scale, "y_layout"), "blocked");
  EXPECT_EQ(StringAttr(*FindOp(g, kernels::cpu::kFusedConcatOp), "y_layout"), "blocked");
  ExpectSameOutputs(**model, **plain,
                    {{"x", FloatTensor({2, 8, 9, 9}, RandomFloats(1296, 167))},
                     {"mean", FloatTensor({40}, RandomFloats(40, 169))}});
}

// Fire / Inception-style blocks: convolutions concatenated, a MaxPool after a concatenation,
// a concatenation of a concatenation, and one into a graph output. Each Concat of convolutions
// becomes a fused concatenation that keeps the blocked layout (24 channels are not whole
// blocks: reordered through the workspace), the MaxPool after one joins the chain, one into a
// graph output keeps its inputs plain, and a Concat reading a graph input is left alone.
// Batch 2; outputs as the unfused graph's.
TEST_F(FusionConvTest, ConcatenationsOfConvolutionsKeepTheBlockedLayout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 12, 12})
      .Output("y", {2, 8, 6, 6})
      .Output("z", {2, 32, 6, 6})
      .Output("w", {2, 24, 12, 12});
  AddConvK(b, "s", "x", "s_out", 8, 16, 1, 1, 1, 0, 81);
  b.Node("Relu", {"s_out"}, {"s_relu"});
  AddConvK(b, "e1", "s_relu", "e1_out", 16, 16, 1, 1, 1, 0, 83);
  AddConvK(b, "e3", "s_relu", "e3_out", 16, 24, 3, 1, 1, 1, 85);
  auto axis = [](onnx::NodeProto& node) {
    auto* a = node.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  };
  axis(b.Node("Concat", {"e1_out", "e3_out"}, {"fire"}));
  auto& pool = b.Node("MaxPool", {"fire"}, {"pooled"});
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = pool.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(name[0] == 'k' ? 3 : 2);
    a->add_ints(name[0] == 'k' ? 3 : 2);
  }
  auto* ceil = pool.add_attribute();
  ceil->set_name("ceil_mode");
  ceil->set_type(onnx::AttributeProto::INT);
  ceil->set_i(1);
  AddConvK(b, "b1", "pooled", "b1_out", 40, 16, 1, 1, 1, 0, 87);
  AddConvK(b, "b3", "pooled", "b3_out", 40, 16, 3, 1, 1, 1, 89);
  axis(b.Node("Concat", {"b1_out", "b3_out"}, {"inner"}));
  axis(b.Node("Concat", {"inner", "b1_out"}, {"outer"}));
  AddConvK(b, "last", "outer", "y", 48, 8, 1, 1, 1, 0, 91);
  // A graph output: assembled in the plain layout from blocked inputs.
  AddConvK(b, "z1", "pooled", "z1_out", 40, 16, 1, 1, 1, 0, 93);
  AddConvK(b, "z3", "pooled", "z3_out", 40, 16, 3, 1, 1, 1, 95);
  axis(b.Node("Concat", {"z1_out", "z3_out"}, {"z"}));
  // A graph input among the inputs: not rewritten.
  AddConvK(b, "w1", "x", "w1_out", 8, 16, 1, 1, 1, 0, 97);
  axis(b.Node("Concat", {"w1_out", "x"}, {"w"}));
  const TensorValue x = FloatTensor({2, 8, 12, 12}, RandomFloats(2 * 8 * 144, 99));
  auto model = LoadBoth(b.Bytes(), x);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedConcatOp), 4);
  EXPECT_EQ(CountOps(g, "Concat"), 1);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedMaxPoolOp), 1);
  EXPECT_EQ(CountOps(g, "MaxPool"), 0);
  for (const Node& node : g.nodes) {
    if (node.op != kernels::cpu::kFusedConcatOp) continue;
    SCOPED_TRACE(node.name);
    // Into a graph output: plain, and so are its inputs (no reorder at the concatenation).
    const std::string want = node.outputs[0] == g.outputs[1].value ? "" : "blocked";
    EXPECT_EQ(StringAttr(node, "x0_layout"), want);
    EXPECT_EQ(StringAttr(node, "x1_layout"), want);
    EXPECT_EQ(StringAttr(node, "y_layout"), want);
  }
  const Node* z1 = FindNamed(g, "z1");
  ASSERT_NE(z1, nullptr);
  EXPECT_EQ(StringAttr(*z1, "y_layout"), "");
}

// U-Net's skip connection: a convolution's output concatenated with a ConvTranspose's (plain
// only) before a convolution. The concatenation is fused and reads the first blocked, the
// second plain (16 channels: whole blocks; 24: not), and its output stays blocked.
TEST_F(FusionConvTest, ConcatenationWithAPlainInputKeepsTheBlockedLayout) {
  for (int64_t up : {16, 24}) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 10, 10}).Output("y", {2, 8, 10, 10});
    AddConvK(b, "a", "x", "a_out", 8, 16, 3, 1, 1, 1, 101);
    b.FloatInit("wt", {8, up, 1, 1}, RandomFloats(8 * up, 103));
    b.Node("ConvTranspose", {"x", "wt"}, {"up"});
    testing::SetIntAttr(&b.Node("Concat", {"a_out", "up"}, {"cat"}), "axis", 1);
    AddConvK(b, "last", "cat", "y", 16 + up, 8, 1, 1, 1, 0, 105);
    auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 10, 10}, RandomFloats(1600, 107)));
    ASSERT_NE(model, nullptr);
    const Node* cat = FindOp(model->graph(), kernels::cpu::kFusedConcatOp);
    ASSERT_NE(cat, nullptr) << "up " << up;
    EXPECT_EQ(StringAttr(*cat, "x0_layout"), "blocked");
    EXPECT_EQ(StringAttr(*cat, "x1_layout"), "");
    EXPECT_EQ(StringAttr(*cat, "y_layout"), "blocked");
  }
}

// MobileNetV2's inverted residual: 1x1 expand → Clip(0, 6) → depthwise 3x3 → Clip(0, 6) → 1x1
// project. The expand and the depthwise become one node (both activations kept), at stride 1
// and 2, and at sizes where the kernel fuses them into one primitive or runs two.
TEST_F(FusionConvTest, PointwiseThenDepthwiseBecomeOneNode) {
  for (int64_t size : {8, 76}) {  // 2x96x76x76 floats: 4.4 MB, one primitive
    for (int64_t stride : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "size " << size << " stride " << stride);
      const int64_t out = (size - 1) / stride + 1;
      ModelBuilder b;
      b.Input("x", onnx::TensorProto::FLOAT, {2, 16, size, size}).Output("y", {2, 24, out, out});
      AddConvK(b, "expand", "x", "e", 16, 96, 1, 1, 1, 0, 61);
      b.FloatInit("lo", {}, {0.0f}).FloatInit("hi", {}, {6.0f});
      b.Node("Clip", {"e", "lo", "hi"}, {"e6"});
      AddConvK(b, "dw", "e6", "d", 96, 96, 3, 96, stride, 1, 63);
      b.Node("Clip", {"d", "lo", "hi"}, {"d6"});
      AddConvK(b, "project", "d6", "y", 96, 24, 1, 1, 1, 0, 65);
      const TensorValue x =
          FloatTensor({2, 16, size, size}, RandomFloats(2 * 16 * size * size, 67));
      auto model = LoadBoth(b.Bytes(), x);
      ASSERT_NE(model, nullptr);
      const Graph& g = model->graph();
      ASSERT_EQ(g.nodes.size(), 2u);
      EXPECT_EQ(g.nodes[0].op, kernels::cpu::kFusedConvDwOp);
      EXPECT_EQ(StringAttr(g.nodes[0], "activation"), "Clip");
      EXPECT_EQ(StringAttr(g.nodes[0], "dw_activation"), "Clip");
      EXPECT_EQ(*g.nodes[0].attributes.GetInt("dw_stride", 0), stride);
      EXPECT_EQ(StringAttr(g.nodes[0], "y_layout"), "blocked");
      EXPECT_EQ(StringAttr(g.nodes[1], "x_layout"), "blocked");
    }
  }
}

TEST_F(FusionConvTest, PointwiseUsedTwiceOrOtherDepthwiseIsLeftAlone) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 6, 6})
      .Output("y", {1, 16, 6, 6})
      .Output("z", {1, 16, 4, 4});
  // e feeds a depthwise conv and an Add: not fused. The second depthwise has pads 0: not fused.
  AddConvK(b, "expand", "x", "e", 8, 16, 1, 1, 1, 0, 71);
  AddConvK(b, "dw", "e", "d", 16, 16, 3, 16, 1, 1, 73);
  b.Node("Add", {"d", "e"}, {"y"});
  AddConvK(b, "expand2", "x", "e2", 8, 16, 1, 1, 1, 0, 75);
  AddConvK(b, "dw2", "e2", "z", 16, 16, 3, 16, 1, 0, 77);
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 8, 6, 6}, RandomFloats(288, 79)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(FindOp(model->graph(), kernels::cpu::kFusedConvDwOp), nullptr);
}

TEST_F(FusionConvTest, ClipWithConstantBoundsIsFused) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 5}).Output("y", {1, 4, 5, 5});
  AddConv(b, "a", "x", "a_out", 4, 4, 11);
  b.FloatInit("lo", {}, {-0.25f}).FloatInit("hi", {}, {0.5f});
  b.Node("Clip", {"a_out", "lo", "hi"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 5, 5}, RandomFloats(100, 12)));
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->graph().nodes.size(), 1u);
  const Node& node = model->graph().nodes[0];
  EXPECT_EQ(StringAttr(node, "activation"), "Clip");
  EXPECT_EQ(*node.attributes.GetFloat("clip_min", 0), -0.25f);
  EXPECT_EQ(*node.attributes.GetFloat("clip_max", 0), 0.5f);
}

// Each activation a conv can run as a oneDNN post-op, fused and computing what the unfused
// graph computes (LoadBoth): SiLU as exported (x * Sigmoid(x), the Mul's operands either way),
// HardSigmoid with its alpha and beta, LeakyRelu with its alpha.
TEST_F(FusionConvTest, ActivationsBecomePostOps) {
  struct Case {
    const char* label;
    const char* fused;  // the "activation" of the fused node
    float alpha, beta;  // expected activation_alpha / activation_beta (LeakyRelu, HardSigmoid)
  };
  for (const Case& c :
       {Case{"Sigmoid", "Sigmoid", 0, 0}, Case{"Tanh", "Tanh", 0, 0},
        Case{"HardSwish", "HardSwish", 0, 0}, Case{"LeakyRelu", "LeakyRelu", 0.1f, 0},
        Case{"HardSigmoid", "HardSigmoid", 0.25f, 0.4f}, Case{"SiLU", "Swish", 0, 0},
        Case{"SiLU, s * x", "Swish", 0, 0}, Case{"GELU with Erf", "Gelu", 0, 0},
        Case{"GELU with Tanh", "GeluTanh", 0, 0}}) {
    SCOPED_TRACE(c.label);
    const std::string label = c.label;
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 5}).Output("y", {1, 4, 5, 5});
    AddConv(b, "a", "x", "a_out", 4, 4, 31);
    if (label == "GELU with Erf") {  // x * 0.5 * (1 + erf(x / sqrt(2))), as exported
      b.FloatInit("root2", {}, {1.4142135f}).FloatInit("one", {}, {1.0f});
      b.FloatInit("half", {}, {0.5f});
      b.Node("Div", {"a_out", "root2"}, {"scaled"});
      b.Node("Erf", {"scaled"}, {"erf"});
      b.Node("Add", {"erf", "one"}, {"shifted"});
      b.Node("Mul", {"a_out", "shifted"}, {"product"});
      b.Node("Mul", {"product", "half"}, {"y"});
    } else if (label == "GELU with Tanh") {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      b.FloatInit("three", {}, {3.0f}).FloatInit("c", {}, {0.044715f});
      b.FloatInit("root", {}, {0.7978846f}).FloatInit("one", {}, {1.0f});
      b.FloatInit("half", {}, {0.5f});
      b.Node("Pow", {"a_out", "three"}, {"cube"});
      b.Node("Mul", {"c", "cube"}, {"t"});
      b.Node("Add", {"a_out", "t"}, {"inner"});
      b.Node("Mul", {"inner", "root"}, {"u"});
      b.Node("Tanh", {"u"}, {"e"});
      b.Node("Add", {"e", "one"}, {"a"});
      b.Node("Mul", {"half", "a_out"}, {"h"});
      b.Node("Mul", {"h", "a"}, {"y"});
    } else if (label == "SiLU") {
      b.Node("Sigmoid", {"a_out"}, {"s"});
      b.Node("Mul", {"a_out", "s"}, {"y"});
    } else if (label == "SiLU, s * x") {
      b.Node("Sigmoid", {"a_out"}, {"s"});
      b.Node("Mul", {"s", "a_out"}, {"y"});
    } else {
      auto& act = b.Node(label, {"a_out"}, {"y"});
      auto set = [&act](const char* name, float value) {
        auto* attr = act.add_attribute();
        attr->set_name(name);
        attr->set_type(onnx::AttributeProto::FLOAT);
        attr->set_f(value);
      };
      if (label == "LeakyRelu") set("alpha", c.alpha);
      if (label == "HardSigmoid") {
        set("alpha", c.alpha);
        set("beta", c.beta);
      }
    }
    // Values around +-5, where the activations bend.
    auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 5, 5}, RandomFloats(100, 32, -5, 5)));
    ASSERT_NE(model, nullptr);
    ASSERT_EQ(model->graph().nodes.size(), 1u);
    const Node& node = model->graph().nodes[0];
    EXPECT_EQ(node.op, kFusedConvOp);
    EXPECT_EQ(StringAttr(node, "activation"), c.fused);
    if (c.alpha != 0) {
      EXPECT_EQ(*node.attributes.GetFloat("activation_alpha", 0), c.alpha);
    }
    if (c.beta != 0) {
      EXPECT_EQ(*node.attributes.GetFloat("activation_beta", 0), c.beta);
    }
  }
}

// SiLU after a residual that only broadcasts (applied outside oneDNN, after the add); and a
// Sigmoid whose output is read twice stays, with its Mul.
TEST_F(FusionConvTest, SwishAfterABroadcastResidualAndASharedSigmoid) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 5})
      .Output("y", {1, 4, 5, 5})
      .Output("z", {1, 4, 5, 5});
  AddConv(b, "a", "x", "a_out", 4, 4, 41);
  AddMeanOverHw(b, "x", "r");
  b.Node("Add", {"a_out", "r"}, {"t"});
  b.Node("Sigmoid", {"t"}, {"ts"});
  b.Node("Mul", {"t", "ts"}, {"y"});
  AddConv(b, "c", "x", "c_out", 4, 4, 43);
  b.Node("Sigmoid", {"c_out"}, {"cs"});
  b.Node("Mul", {"c_out", "cs"}, {"m"});
  b.Node("Add", {"m", "cs"}, {"z"});  // the Sigmoid's output is read twice
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 5, 5}, RandomFloats(100, 42, -3, 3)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kFusedConvOp), 2);
  EXPECT_EQ(CountOps(g, "Sigmoid"), 1);
  EXPECT_EQ(CountOps(g, "Mul"), 1);
  int swish = 0;
  for (const Node& node : g.nodes) swish += StringAttr(node, "activation") == "Swish" ? 1 : 0;
  EXPECT_EQ(swish, 1);
}

TEST_F(FusionConvTest, SharedOrOutputIntermediatesAreLeftAlone) {
  // a_out is also a graph output: the Relu stays. c's output feeds a ReduceMax over C (no
  // layout-aware kernel): stays plain.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 6, 6})
      .Output("y", {1, 1, 6, 6})
      .Output("a_out", {1, 4, 6, 6});
  AddConv(b, "a", "x", "a_out", 4, 4, 21);
  b.Node("Relu", {"a_out"}, {"r"});
  AddConv(b, "c", "r", "c_out", 4, 4, 23);
  auto& max = b.Node("ReduceMax", {"c_out"}, {"y"});
  auto* axes = max.add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(1);
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 6, 6}, RandomFloats(144, 24)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "Relu"), 1);
  EXPECT_EQ(CountOps(g, kFusedConvOp), 2);
  for (const Node& node : g.nodes) {
    EXPECT_EQ(StringAttr(node, "y_layout"), "") << node.name;
    EXPECT_EQ(StringAttr(node, "activation"), "") << node.name;
  }
}

// x → 1x1 conv of `stride` with bias; weights named `name`_w / `name`_b.
void AddPointwiseConv(ModelBuilder& b, const std::string& name, const std::string& in,
                      const std::string& out, int64_t c_in, int64_t c_out, int64_t stride,
                      uint32_t seed) {
  b.FloatInit(name + "_w", {c_out, c_in, 1, 1}, RandomFloats(c_out * c_in, seed, -0.5f, 0.5f));
  b.FloatInit(name + "_b", {c_out}, RandomFloats(c_out, seed + 1));
  auto& node = b.Node("Conv", {in, name + "_w", name + "_b"}, {out}, name);
  auto* strides = node.add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->add_ints(stride);
  strides->add_ints(stride);
}

// The node that carries a residual (a fused conv with four inputs), or nullptr.
const Node* ResidualCarrier(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (node.op == kFusedConvOp && node.inputs.size() == 4) return &node;
  }
  return nullptr;
}

// A downsampling block whose two branches both end in a Conv: the residual Add goes into the
// unit-stride conv of the main branch, and the strided shortcut runs alone, wherever the node
// order puts it (first, as RegNet exports it: x = proj(x) + f(x); or after the main branch, as
// ResNet's Bottleneck does).
TEST_F(FusionConvTest, ResidualAddGoesIntoTheUnitStrideConvOfTwo) {
  for (const bool shortcut_first : {true, false}) {
    SCOPED_TRACE(shortcut_first ? "shortcut first" : "shortcut last");
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, 8, 8, 8}).Output("y", {1, 8, 4, 4});
    if (shortcut_first) AddPointwiseConv(b, "proj", "x", "p", 8, 8, 2, 61);
    AddPointwiseConv(b, "fa", "x", "fa_out", 8, 8, 2, 63);
    b.Node("Relu", {"fa_out"}, {"fa_relu"});
    AddPointwiseConv(b, "fc", "fa_relu", "fc_out", 8, 8, 1, 65);
    if (!shortcut_first) AddPointwiseConv(b, "proj", "x", "p", 8, 8, 2, 61);
    b.Node("Add", {"p", "fc_out"}, {"sum"});
    b.Node("Relu", {"sum"}, {"y"});
    auto model = LoadBoth(b.Bytes(), FloatTensor({1, 8, 8, 8}, RandomFloats(512, 67)));
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    EXPECT_EQ(CountOps(g, kFusedConvOp), 3);
    EXPECT_EQ(CountOps(g, "Add") + CountOps(g, "Relu"), 0);
    const Node* carrier = ResidualCarrier(g);
    ASSERT_NE(carrier, nullptr);
    EXPECT_EQ(carrier->name, "fc");
    EXPECT_EQ(StringAttr(*carrier, "activation"), "Relu");
    const Node* proj = FindNamed(g, "proj");
    ASSERT_NE(proj, nullptr);
    EXPECT_EQ(carrier->inputs[3], proj->outputs[0]);
    EXPECT_EQ(StringAttr(*proj, "activation"), "");
    // The shortcut runs where the node order put it (first, or after the main branch's first
    // conv); the conv with the residual runs last.
    EXPECT_EQ(&g.nodes[shortcut_first ? 0 : 1], proj);
    EXPECT_EQ(&g.nodes[2], carrier);
  }
}

TEST_F(FusionConvTest, ResidualThatOnlyBroadcastsIsAddedAfterTheConv) {
  // r = ReduceMean(x) over H and W: [1,4,1,1], computed at run time; y = Relu(conv(x) + r).
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 5}).Output("y", {1, 4, 5, 5});
  AddConv(b, "a", "x", "a_out", 4, 4, 51);
  AddMeanOverHw(b, "x", "r");
  b.Node("Add", {"a_out", "r"}, {"s"});
  b.Node("Relu", {"s"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 4, 5, 5}, RandomFloats(100, 52)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), kFusedConvOp), 1);
  EXPECT_EQ(CountOps(model->graph(), "Add") + CountOps(model->graph(), "Relu"), 0);
}

TEST_F(FusionConvTest, AddOfTwoUsesOfOneConvIsNotFused) {
  // Add(a, a): the conv's output has two uses, so the Add must stay a sum of its own (the
  // chain's fused sum), not the conv's residual.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 4, 4}).Output("y", {1, 2, 4, 4});
  AddConv(b, "a", "x", "a_out", 2, 2, 31);
  b.Node("Add", {"a_out", "a_out"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({1, 2, 4, 4}, RandomFloats(32, 32)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "Add") + CountOps(g, kernels::cpu::kFusedAddOp), 1);
  const Node* conv = FindOp(g, kFusedConvOp);
  ASSERT_NE(conv, nullptr);
  EXPECT_LT(conv->inputs.size(), 4u);
}

// 1x1 conv [C→M] then BatchNormalization, computed by hand.
TEST_F(FusionConvTest, BatchNormIsFoldedIntoTheConv) {
  const int64_t c = 3, m = 2, hw = 4;
  const std::vector<float> w = RandomFloats(m * c, 41), bias = {0.5f, -0.25f};
  const std::vector<float> scale = {1.5f, 0.75f}, shift = {0.1f, -0.2f}, mean = {0.3f, -0.4f},
                           var = {2.0f, 0.5f};
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, c, 2, 2}).Output("y", {1, m, 2, 2});
  b.FloatInit("w", {m, c, 1, 1}, w).FloatInit("bias", {m}, bias);
  b.FloatInit("scale", {m}, scale).FloatInit("shift", {m}, shift);
  b.FloatInit("mean", {m}, mean).FloatInit("var", {m}, var);
  b.Node("Conv", {"x", "w", "bias"}, {"conv"});
  b.Node("BatchNormalization", {"conv", "scale", "shift", "mean", "var"}, {"y"});
  const std::vector<float> xs = RandomFloats(c * hw, 42);
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(CountOps((*model)->graph(), "BatchNormalization"), 0);
  const std::vector<float> got = Run(*model, FloatTensor({1, c, 2, 2}, xs));
  ASSERT_EQ(got.size(), static_cast<size_t>(m * hw));
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t p = 0; p < hw; ++p) {
      float conv = bias[o];
      for (int64_t k = 0; k < c; ++k) conv += w[o * c + k] * xs[k * hw + p];
      const float want = (conv - mean[o]) / std::sqrt(var[o] + 1e-5f) * scale[o] + shift[o];
      EXPECT_NEAR(got[o * hw + p], want, 1e-5f) << o << "," << p;
    }
  }
}

TEST_F(FusionConvTest, BatchNormAfterASharedConvIsLeftAlone) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2, 2, 2})
      .Output("y", {1, 2, 2, 2})
      .Output("conv", {1, 2, 2, 2});
  b.FloatInit("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  b.FloatInit("scale", {2}, {1, 2}).FloatInit("shift", {2}, {0, 1});
  b.FloatInit("mean", {2}, {0, 0}).FloatInit("var", {2}, {1, 1});
  b.Node("Conv", {"x", "w"}, {"conv"});
  b.Node("BatchNormalization", {"conv", "scale", "shift", "mean", "var"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  // Not folded into the conv's weights (its output is also a graph output): it becomes a
  // channel scale of the conv's output instead.
  const Graph& g = (*model)->graph();
  EXPECT_EQ(CountOps(g, "BatchNormalization"), 0);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedChannelScaleOp), 1);
  const Node* conv = FindOp(g, kFusedConvOp);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(g.values[conv->inputs[1]].name, "w");
  // x = 1 everywhere: conv = [3, 7] per pixel, y = conv * scale + shift = [3, 15].
  auto out =
      testing::RunPlan(**model, {{"x", FloatTensor({1, 2, 2, 2}, std::vector<float>(8, 1))}});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto near = [](float v) { return ::testing::FloatNear(v, 1e-3f); };  // epsilon 1e-5
  EXPECT_THAT(Floats((*out)[0].value),
              ::testing::ElementsAre(near(3), near(3), near(3), near(3), near(15), near(15),
                                     near(15), near(15)));
  EXPECT_THAT(Floats((*out)[1].value), ::testing::ElementsAre(3, 3, 3, 3, 7, 7, 7, 7));
}

}  // namespace
}  // namespace reprise::runtime::engine
