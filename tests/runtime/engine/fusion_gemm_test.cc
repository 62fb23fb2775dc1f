#include "runtime/engine/fusion_gemm.h"

#include <cmath>
#include <random>
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

using kernels::cpu::kFusedGemmOp;
using testing::CountOps;
using testing::Floats;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;

class FusionGemmTest : public testing::FusionTest {
 protected:
  void SetUp() override { RegisterAllBut({kFusedGemmOp}); }

  std::shared_ptr<const Model> LoadBoth(const std::string& bytes, const TensorValue& x) {
    std::shared_ptr<const Model> plain;
    auto fused = LoadBothWithin(bytes, x, 1e-5f, &plain);
    if (plain != nullptr) {
      EXPECT_EQ(CountOps(plain->graph(), kFusedGemmOp), 0);
    }
    return fused;
  }
};

// x [2,8] → Gemm(w [8,8] transposed, b) named `name`.
void AddGemm(ModelBuilder& b, const std::string& name, const std::string& in,
             const std::string& out, uint32_t seed) {
  b.FloatInit(name + "_w", {8, 8}, RandomFloats(64, seed));
  b.FloatInit(name + "_b", {8}, RandomFloats(8, seed + 1));
  testing::SetIntAttr(&b.Node("Gemm", {in, name + "_w", name + "_b"}, {out}, name), "transB", 1);
}

TEST_F(FusionGemmTest, ResidualLayersBecomeOneStepEach) {
  // h = x + Relu(Gemm(x)); y = h + Tanh(Gemm(h)); z = Sigmoid(Gemm(y)) — the last has no Add.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8}).Output("z", {2, 8});
  AddGemm(b, "g1", "x", "g1_out", 1);
  b.Node("Relu", {"g1_out"}, {"r1"});
  b.Node("Add", {"x", "r1"}, {"h"});
  AddGemm(b, "g2", "h", "g2_out", 3);
  b.Node("Tanh", {"g2_out"}, {"t2"});
  b.Node("Add", {"t2", "h"}, {"y"});
  AddGemm(b, "g3", "y", "g3_out", 5);
  b.Node("Sigmoid", {"g3_out"}, {"z"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8}, RandomFloats(16, 7)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(CountOps(g, kFusedGemmOp), 3);
  EXPECT_EQ(g.nodes[0].inputs.size(), 4u);  // with the residual x
  EXPECT_EQ(g.nodes[2].inputs.size(), 3u);  // no residual
  EXPECT_EQ(*g.nodes[2].attributes.GetString("activation", ""), "Sigmoid");
}

TEST_F(FusionGemmTest, ClipAndBroadcastResidual) {
  // Add of a [1,8] graph input that broadcasts over the rows.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8}).Output("y", {2, 8});
  AddGemm(b, "g", "x", "g_out", 11);
  b.FloatInit("lo", {}, {-0.2f}).FloatInit("hi", {}, {0.3f});
  b.Node("Clip", {"g_out", "lo", "hi"}, {"c"});
  b.Node("ReduceMean", {"x"}, {"m"});  // [1,1]: keepdims
  b.Node("Add", {"c", "m"}, {"y"});
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8}, RandomFloats(16, 12)));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CountOps(model->graph(), kFusedGemmOp), 1);
  EXPECT_EQ(CountOps(model->graph(), "Add"), 0);
}

TEST_F(FusionGemmTest, ConstantAddsSharedOutputsAndLoneGemmsAreLeftAlone) {
  // g1 → Add(constant): stays (a bias-like broadcast). g2's output is also a graph output: its
  // Relu stays. g3 has nothing after it: stays a Gemm.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 8}).Output("y", {2, 8}).Output("g2_out", {2, 8});
  AddGemm(b, "g1", "x", "g1_out", 21);
  b.FloatInit("k", {8}, RandomFloats(8, 22));
  b.Node("Add", {"g1_out", "k"}, {"a"});
  AddGemm(b, "g2", "a", "g2_out", 23);
  b.Node("Relu", {"g2_out"}, {"r"});
  AddGemm(b, "g3", "r", "y", 25);
  auto model = LoadBoth(b.Bytes(), FloatTensor({2, 8}, RandomFloats(16, 26)));
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kFusedGemmOp), 0);
  EXPECT_EQ(CountOps(g, "Gemm"), 3);
  EXPECT_EQ(CountOps(g, "Add"), 1);
  EXPECT_EQ(CountOps(g, "Relu"), 1);
}

}  // namespace
}  // namespace reprise::runtime::engine
