// The transformer rewrites (fusion_transformer.h): each pattern is loaded with and without the
// replacement op registered, both give the same output on random inputs, and the node counts
// show where the rewrite happened and where it must not.
#include "runtime/engine/fusion_transformer.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/fusion_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::CountOps;
using testing::Floats;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;
using testing::SetIntsAttr;

class FusionTransformerTest : public testing::FusionTest {
 protected:
  void SetUp() override {
    RegisterAllBut({"LayerNormalization", "Gelu", kernels::cpu::kFusedMatMulOp,
                    kernels::cpu::kFusedChannelNormOp});
  }

  std::shared_ptr<const Model> LoadBoth(const std::string& bytes, const TensorValue& x,
                                        float tolerance = 2e-5f) {
    return LoadBothWithin(bytes, x, tolerance);
  }
};

// Options of the decomposed LayerNorm written by AddLayerNorm.
struct NormForm {
  bool two_subs = false;    // x - mean computed twice
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  bool reciprocal = false;  // Mul(d, Reciprocal(s)) instead of Div(d, s)
  bool beta = true;
  float exponent = 2.0f;
  int64_t axis = -1;
  const char* gamma = "";             // the gamma value's name; empty: a constant
  std::vector<int64_t> params = {8};  // the shape of gamma and beta
};

// in [*, 8] → LayerNorm over the last axis (or form.axis) → out; intermediates are named
// p + "_<step>".
void AddLayerNorm(ModelBuilder& b, const std::string& p, const std::string& in,
                  const std::string& out, const NormForm& form, uint32_t seed) {
  b.FloatInit(p + "_eps", {}, {1e-5f}).FloatInit(p + "_two", {}, {form.exponent});
  const size_t size = static_cast<size_t>(NumElements(form.params));
  b.FloatInit(p + "_gamma", form.params, RandomFloats(size, seed));
  b.FloatInit(p + "_beta", form.params, RandomFloats(size, seed + 1));
  SetIntsAttr(&b.Node("ReduceMean", {in}, {p + "_mean"}), "axes", {form.axis});
  b.Node("Sub", {in, p + "_mean"}, {p + "_d"});
  std::string d2 = p + "_d";
  if (form.two_subs) {
    d2 = p + "_d2";
    b.Node("Sub", {in, p + "_mean"}, {d2});
  }
  if (form.mul_square) {
    b.Node("Mul", {p + "_d", p + "_d"}, {p + "_sq"});
  } else {
    b.Node("Pow", {p + "_d", p + "_two"}, {p + "_sq"});
  }
  SetIntsAttr(&b.Node("ReduceMean", {p + "_sq"}, {p + "_var"}), "axes", {form.axis});
  b.Node("Add", {p + "_var", p + "_eps"}, {p + "_ve"});
  b.Node("Sqrt", {p + "_ve"}, {p + "_std"});
  if (form.reciprocal) {
    b.Node("Reciprocal", {p + "_std"}, {p + "_rstd"});
    b.Node("Mul", {d2, p + "_rstd"}, {p + "_n"});
  } else {
    b.Node("Div", {d2, p + "_std"}, {p + "_n"});
  }
  if (form.beta) {
    b.Node("Mul", {p + "_gamma", p + "_n"}, {p + "_g"});
    b.Node("Add", {p + "_g", p + "_beta"}, {out});
  } else {
    b.Node("Mul", {p + "_n", *form.gamma == 0 ? p + "_gamma" : std::string(form.gamma)}, {out});
  }
}

TEST_F(FusionTransformerTest, LayerNormFormsBecomeOneNode) {
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3, 8}).Output("y", {2, 3, 8});
  AddLayerNorm(b, "ln1", "x", "h1", {}, 1);
  AddLayerNorm(b, "ln2", "h1", "h2",
               {.two_subs = true, .mul_square = true, .reciprocal = true, .beta = false}, 3);
  AddLayerNorm(b, "ln3", "h2", "y", {.two_subs = true}, 5);
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 3, 8}, RandomFloats(48, 7)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(CountOps(g, "LayerNormalization"), 3);
  EXPECT_EQ(g.nodes[1].inputs.size(), 2u);  // no beta
  EXPECT_FLOAT_EQ(*g.nodes[0].attributes.GetFloat("epsilon", 0.0f), 1e-5f);
}

// The value LayerNorm2d reads: x [N, 8, 5, W] itself, or (`unknown_rank`) a Squeeze of it
// without axes, whose rank shape inference cannot tell (N might be 1), as it loses NAFNet's
// behind its gates' Slices.
std::string NormInput(ModelBuilder& b, int64_t w, bool unknown_rank) {
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 8, 5, w});
  if (!unknown_rank) return "x";
  b.Node("Squeeze", {"x"}, {"xs"});
  return "xs";
}

// LayerNorm2d as image-restoration networks write it out, over axis 1 of [N, C, H, W], with
// parameters of [1, C, 1, 1] and [C, 1, 1]: one kFusedChannelNormOp each, also where shape
// inference lost x's rank (the parameters' ranks tell). A mean over axis 2, or, at an unknown
// rank, parameters along another axis, are left alone.
TEST_F(FusionTransformerTest, ChannelLayerNormBecomesOneNode) {
  using kernels::cpu::kFusedChannelNormOp;
  for (bool unknown_rank : {false, true}) {
    SCOPED_TRACE(unknown_rank ? "unknown rank" : "known rank");
    ModelBuilder b(13);
    const std::string x = NormInput(b, 7, unknown_rank);
    b.Output("y", {-1, 8, 5, 7});
    AddLayerNorm(b, "ln1", x, "h1", {.axis = 1, .params = {1, 8, 1, 1}}, 1);
    AddLayerNorm(b, "ln2", "h1", "y", {.two_subs = true, .axis = 1, .params = {8, 1, 1}}, 3);
    auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 5, 7}, RandomFloats(560, 7)));
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    EXPECT_EQ(g.nodes.size(), unknown_rank ? 3u : 2u);
    EXPECT_EQ(CountOps(g, kFusedChannelNormOp), 2);
  }
  struct Case {
    int64_t axis;
    std::vector<int64_t> params;
    bool unknown_rank;
  };
  for (const Case& c : {Case{2, {1, 1, 5, 1}, false}, Case{1, {1, 1, 1, 8}, true}}) {
    ModelBuilder b(13);
    const std::string x = NormInput(b, 8, c.unknown_rank);
    b.Output("y", {-1, 8, 5, 8});
    AddLayerNorm(b, "ln", x, "y", {.axis = c.axis, .params = c.params}, 9);
    auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 5, 8}, RandomFloats(640, 7)));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(CountOps(model->graph(), kFusedChannelNormOp), 0) << "axis " << c.axis;
  }
}

TEST_F(FusionTransformerTest, LayerNormLeftAloneWhenThePatternDiffers) {
  struct Case {
    std::string what;
    NormForm form;
    bool std_is_output = false;
  };
  const std::vector<Case> cases = {
      {"exponent 4", {.exponent = 4.0f}},
      {"mean over axis 1", {.axis = 1}},
      {"an intermediate is a graph output", {}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder b(13);
    b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 8}).Output("y", {2, 8, 8});
    if (c.std_is_output) b.Output("ln_std", {2, 8, 1});
    AddLayerNorm(b, "ln", "x", "y", c.form, 11);
    auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 8}, RandomFloats(128, 12)));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(CountOps(model->graph(), "LayerNormalization"), 0);
    EXPECT_EQ(CountOps(model->graph(), "ReduceMean"), 2);
  }
}

TEST_F(FusionTransformerTest, LayerNormNeedsConstantGamma) {
  // gamma computed from the input (not a constant): left alone.
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8}).Output("y", {2, 8});
  b.Node("Sigmoid", {"x"}, {"s"});
  AddLayerNorm(b, "ln", "x", "y", {.beta = false, .gamma = "s"}, 13);
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8}, RandomFloats(16, 14)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "LayerNormalization"), 0);
}

// Which of the usual orderings AddGelu writes.
enum class GeluOrder { kTorch, kHalfLast, kHalfFirst };

// out = GELU(in) written out with Erf; `root` is 1.41421 (Div) or 0.707107 (Mul).
void AddGelu(ModelBuilder& b, const std::string& p, const std::string& in, const std::string& out,
             GeluOrder order, bool multiply, float root) {
  b.FloatInit(p + "_root", {}, {root}).FloatInit(p + "_one", {}, {1.0f});
  b.FloatInit(p + "_half", {}, {0.5f});
  b.Node(multiply ? "Mul" : "Div", {in, p + "_root"}, {p + "_u"});
  b.Node("Erf", {p + "_u"}, {p + "_e"});
  b.Node("Add", {p + "_one", p + "_e"}, {p + "_a"});
  switch (order) {
    case GeluOrder::kTorch:
      b.Node("Mul", {in, p + "_a"}, {p + "_m"});
      b.Node("Mul", {p + "_m", p + "_half"}, {out});
      break;
    case GeluOrder::kHalfLast:
      b.Node("Mul", {p + "_a", p + "_half"}, {p + "_m"});
      b.Node("Mul", {in, p + "_m"}, {out});
      break;
    case GeluOrder::kHalfFirst:
      b.Node("Mul", {p + "_half", in}, {p + "_h"});
      b.Node("Mul", {p + "_h", p + "_a"}, {out});
      break;
  }
}

TEST_F(FusionTransformerTest, GeluOrderingsBecomeOneNode) {
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4, 16}).Output("y", {4, 16});
  AddGelu(b, "g1", "x", "h1", GeluOrder::kTorch, false, 1.4142135f);
  AddGelu(b, "g2", "h1", "h2", GeluOrder::kHalfLast, true, 0.70710677f);
  AddGelu(b, "g3", "h2", "y", GeluOrder::kHalfFirst, false, 1.4142135f);
  std::vector<float> x = RandomFloats(64, 21);
  for (float& v : x) v *= 4.0f;
  auto model = LoadBoth(b.Bytes(), FloatTensor({4, 16}, x));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->graph().nodes.size(), 3u);
  EXPECT_EQ(CountOps(model->graph(), "Gelu"), 3);
}

// out = 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with the cube as Pow(x, 3)
// or x * (x * x); `coefficient` replaces 0.044715 (to write a wrong one).
void AddGeluTanh(ModelBuilder& b, const std::string& p, const std::string& in,
                 const std::string& out, bool pow, float coefficient = 0.044715f) {
  b.FloatInit(p + "_three", {}, {3.0f}).FloatInit(p + "_c", {}, {coefficient});
  b.FloatInit(p + "_root", {}, {0.7978846f}).FloatInit(p + "_one", {}, {1.0f});
  b.FloatInit(p + "_half", {}, {0.5f});
  if (pow) {
    b.Node("Pow", {in, p + "_three"}, {p + "_cube"});
  } else {
    b.Node("Mul", {in, in}, {p + "_sq"});
    b.Node("Mul", {p + "_sq", in}, {p + "_cube"});
  }
  b.Node("Mul", {p + "_c", p + "_cube"}, {p + "_t"});
  b.Node("Add", {in, p + "_t"}, {p + "_inner"});
  b.Node("Mul", {p + "_inner", p + "_root"}, {p + "_u"});
  b.Node("Tanh", {p + "_u"}, {p + "_e"});
  b.Node("Add", {p + "_e", p + "_one"}, {p + "_a"});
  b.Node("Mul", {p + "_half", in}, {p + "_h"});
  b.Node("Mul", {p + "_h", p + "_a"}, {out});
}

TEST_F(FusionTransformerTest, TanhGeluBecomesGeluWithTanhApproximation) {
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4, 16}).Output("y", {4, 16});
  AddGeluTanh(b, "g1", "x", "h1", true);
  AddGeluTanh(b, "g2", "h1", "h2", false);
  AddGeluTanh(b, "g3", "h2", "y", true, 0.05f);  // not GELU's coefficient: stays
  std::vector<float> x = RandomFloats(64, 23);
  for (float& v : x) v *= 4.0f;
  auto model = LoadBoth(b.Bytes(), FloatTensor({4, 16}, x));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, "Gelu"), 2);
  EXPECT_EQ(CountOps(g, "Tanh"), 1);
  EXPECT_EQ(*g.nodes[0].attributes.GetString("approximate", ""), "tanh");
}

TEST_F(FusionTransformerTest, GeluLeftAloneWhenThePatternDiffers) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    ModelBuilder b(13);
    b.Input("x", onnx::TensorProto::FLOAT, {4, 16}).Output("y", {4, 16});
    // 0: divides by 2, not sqrt(2); 1: the Erf output is also a graph output; 2: it also
    // feeds another node.
    AddGelu(b, "g", "x", "y", GeluOrder::kTorch, false, variant == 0 ? 2.0f : 1.4142135f);
    if (variant == 1) b.Output("g_e", {4, 16});
    if (variant == 2) {
      b.Node("Add", {"g_e", "y"}, {"z"});
      b.Output("z", {4, 16});
    }
    auto model = LoadBoth(b.Bytes(), FloatTensor({4, 16}, RandomFloats(64, 22)));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(CountOps(model->graph(), "Gelu"), 0);
    EXPECT_EQ(CountOps(model->graph(), "Erf"), 1);
  }
}

TEST_F(FusionTransformerTest, LinearBiasGeluResidualBecomesOneNode) {
  // x [2,3,8]: x + GELU(x @ w + b) (the bias first in the Add, as torch exports it).
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3, 8}).Output("y", {2, 3, 8});
  b.FloatInit("w", {8, 8}, RandomFloats(64, 31)).FloatInit("b", {8}, RandomFloats(8, 32));
  b.Node("MatMul", {"x", "w"}, {"mm"});
  b.Node("Add", {"b", "mm"}, {"lin"});
  AddGelu(b, "g", "lin", "act", GeluOrder::kTorch, false, 1.4142135f);
  b.Node("Add", {"x", "act"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 3, 8}, RandomFloats(48, 33)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, kernels::cpu::kFusedMatMulOp);
  EXPECT_EQ(g.nodes[0].inputs.size(), 4u);  // A, B, bias, residual
  EXPECT_EQ(*g.nodes[0].attributes.GetString("activation", ""), "Gelu");
}

TEST_F(FusionTransformerTest, AttentionTransposesScaleAndMaskFoldIntoTheProducts) {
  // x [2,4,8] as 2 heads of 4: scores = Q K^T / 2 + mask → Softmax → @ V → back to [2,4,2,4].
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 4, 8}).Output("y", {2, 4, 2, 4});
  b.Int64Init("heads", {4}, {2, 4, 2, 4});
  b.FloatInit("kw", {8, 8}, RandomFloats(64, 41)).FloatInit("two", {}, {2.0f});
  b.FloatInit("mask", {1, 1, 1, 4}, {0.0f, 0.0f, 0.0f, -10000.0f});
  b.Node("Reshape", {"x", "heads"}, {"xh"});
  b.Node("Tanh", {"x"}, {"xs"});
  b.Node("MatMul", {"xs", "kw"}, {"k"});
  b.Node("Reshape", {"k", "heads"}, {"kh"});
  SetIntsAttr(&b.Node("Transpose", {"xh"}, {"q"}), "perm", {0, 2, 1, 3});
  SetIntsAttr(&b.Node("Transpose", {"kh"}, {"kt"}), "perm", {0, 2, 3, 1});
  b.Node("MatMul", {"q", "kt"}, {"s"});
  b.Node("Div", {"s", "two"}, {"ss"});
  b.Node("Add", {"ss", "mask"}, {"sm"});
  testing::SetIntAttr(&b.Node("Softmax", {"sm"}, {"p"}), "axis", -1);
  SetIntsAttr(&b.Node("Transpose", {"xh"}, {"v"}), "perm", {0, 2, 1, 3});
  b.Node("MatMul", {"p", "v"}, {"c"});
  SetIntsAttr(&b.Node("Transpose", {"c"}, {"y"}), "perm", {0, 2, 1, 3});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 4, 8}, RandomFloats(64, 42)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  // The first MatMul (k = xs @ kw) has nothing to absorb; the two attention products take
  // their three input transposes, the scale and the mask; the output Transpose stays.
  EXPECT_EQ(CountOps(g, "MatMul"), 1);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedMatMulOp), 2);
  EXPECT_EQ(CountOps(g, "Transpose"), 1);
  EXPECT_EQ(CountOps(g, "Div"), 0);
  EXPECT_EQ(CountOps(g, "Add"), 0);
}

TEST_F(FusionTransformerTest, ScaledTransposedOperandsFoldIntoAlpha) {
  // torch's nn.MultiheadAttention: (Transpose(q) / 4) @ Transpose(k) * 0.5, on x [4,2,8].
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4, 2, 8}).Output("y", {2, 4, 4});
  b.FloatInit("four", {}, {4.0f}).FloatInit("half", {1}, {0.5f});
  SetIntsAttr(&b.Node("Transpose", {"x"}, {"q"}), "perm", {1, 0, 2});
  b.Node("Div", {"q", "four"}, {"qs"});
  b.Node("Tanh", {"x"}, {"k"});
  SetIntsAttr(&b.Node("Transpose", {"k"}, {"kt"}), "perm", {1, 2, 0});
  b.Node("Mul", {"half", "kt"}, {"kts"});
  b.Node("MatMul", {"qs", "kts"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({4, 2, 8}, RandomFloats(64, 91)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  ASSERT_EQ(g.nodes.size(), 2u);  // Tanh, FusedMatMul
  EXPECT_EQ(g.nodes[1].op, kernels::cpu::kFusedMatMulOp);
  EXPECT_FLOAT_EQ(*g.nodes[1].attributes.GetFloat("alpha", 1.0f), 0.125f);
}

TEST_F(FusionTransformerTest, ScaleOfHigherRankIsNotAScalar) {
  // x [4,8] @ w * k with k of shape [1,1,1]: the product becomes [1,4,8]; the Mul stays.
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4, 8}).Output("y", {1, 4, 8});
  b.FloatInit("w", {8, 8}, RandomFloats(64, 81)).FloatInit("k", {1, 1, 1}, {0.5f});
  b.Node("MatMul", {"x", "w"}, {"mm"});
  b.Node("Mul", {"mm", "k"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({4, 8}, RandomFloats(32, 82)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "Mul"), 1);
  EXPECT_EQ(CountOps(model->graph(), "MatMul"), 1);
}

TEST_F(FusionTransformerTest, TransposedLeftOperandAndClip) {
  // Transpose(x [2,8,3], perm [0,2,1]) @ w [8,4], clipped: A is read transposed in place.
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8, 3}).Output("y", {2, 3, 4});
  b.FloatInit("w", {8, 4}, RandomFloats(32, 51));
  b.FloatInit("lo", {}, {-0.3f}).FloatInit("hi", {}, {0.4f});
  SetIntsAttr(&b.Node("Transpose", {"x"}, {"xt"}), "perm", {0, 2, 1});
  b.Node("MatMul", {"xt", "w"}, {"mm"});
  b.Node("Clip", {"mm", "lo", "hi"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8, 3}, RandomFloats(48, 52)));
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->graph().nodes.size(), 1u);
  EXPECT_EQ(model->graph().nodes[0].op, kernels::cpu::kFusedMatMulOp);
}

TEST_F(FusionTransformerTest, MatMulLeftAloneWhereItMustBe) {
  // m1's output is also a graph output: its Relu stays (m1 stays a MatMul). m2 takes its
  // Transpose. The [2,1,8] constant would widen the rank-2 product: its Add stays, and m3 with
  // nothing to absorb stays a MatMul.
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {8, 8}).Output("y", {2, 8, 8}).Output("m1", {8, 8});
  b.FloatInit("w", {8, 8}, RandomFloats(64, 61));
  b.FloatInit("wide", {2, 1, 8}, RandomFloats(16, 62));
  b.Node("MatMul", {"x", "w"}, {"m1"});
  b.Node("Relu", {"m1"}, {"r"});
  SetIntsAttr(&b.Node("Transpose", {"r"}, {"rt"}), "perm", {1, 0});
  b.Node("MatMul", {"rt", "w"}, {"m2"});
  b.Node("MatMul", {"m2", "w"}, {"m3"});
  b.Node("Add", {"m3", "wide"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({8, 8}, RandomFloats(64, 63)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedMatMulOp), 1);
  EXPECT_EQ(CountOps(g, "Transpose"), 0);
  EXPECT_EQ(CountOps(g, "Relu"), 1);
  EXPECT_EQ(CountOps(g, "Add"), 1);
  EXPECT_EQ(CountOps(g, "MatMul"), 2);
}

TEST_F(FusionTransformerTest, TransposeMovingTheLastAxisAwayStays) {
  // perm [2,1,0] puts the stored last axis first: no stride trick reads it as a matrix.
  ModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2, 4, 8}).Output("y", {8, 4, 3});
  b.FloatInit("w", {2, 3}, RandomFloats(6, 71));
  SetIntsAttr(&b.Node("Transpose", {"x"}, {"xt"}), "perm", {2, 1, 0});
  b.Node("MatMul", {"xt", "w"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 4, 8}, RandomFloats(64, 72)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), "Transpose"), 1);
  EXPECT_EQ(CountOps(model->graph(), "MatMul"), 1);
}

}  // namespace
}  // namespace reprise::runtime::engine
