#include "runtime/engine/fusion_layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/fusion_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using kernels::cpu::kFusedTransposeOp;
using testing::CountOps;
using testing::Floats;
using testing::FloatTensor;
using testing::ModelBuilder;
using testing::RandomFloats;
using testing::SetIntAttr;
using testing::SetIntsAttr;

class FusionLayoutTest : public testing::FusionTest {
 protected:
  void SetUp() override { RegisterAllBut({kFusedTransposeOp}); }

  // Every output of `model` on the input "x".
  static std::vector<std::vector<float>> RunAll(const Model& model, const TensorValue& x) {
    auto out = testing::RunPlan(model, {{"x", x}});
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::vector<float>> values;
    if (out.ok()) {
      for (const NamedTensor& t : *out) values.push_back(Floats(t.value));
    }
    return values;
  }

  // Loads `bytes` with and without the fused op; both must give the same bits on `x` (the
  // chain only moves elements). Returns the rewritten model and its outputs.
  std::shared_ptr<const Model> LoadSame(const std::string& bytes, const TensorValue& x,
                                        std::vector<std::vector<float>>* outputs) {
    auto fused = Model::LoadBytes(bytes, registry_);
    auto plain = Model::LoadBytes(bytes, unfused_);
    EXPECT_TRUE(fused.ok()) << fused.status();
    EXPECT_TRUE(plain.ok()) << plain.status();
    if (!fused.ok() || !plain.ok()) return nullptr;
    EXPECT_EQ(CountOps((*plain)->graph(), kFusedTransposeOp), 0);
    *outputs = RunAll(**fused, x);
    EXPECT_EQ(*outputs, RunAll(**plain, x));
    return *fused;
  }
};

// ShuffleNet V2's unit as PyTorch exports it with a dynamic batch: the shapes come from Shape
// nodes of the concatenation and of the shuffled value; the split reads the channel count. With
// `convs`, the concatenated values are two 3x3 convolutions' outputs (the branches of a unit)
// instead of x and -x.
std::string ShuffleUnit(bool convs = false) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4, 3, 5});
  b.Int64Init("k0", {1}, {0}).Int64Init("k1", {1}, {1}).Int64Init("k2", {1}, {2});
  b.Int64Init("k4", {1}, {4}).Int64Init("m1", {1}, {-1});
  if (convs) {
    testing::AddConv(b, "left", "x", "l", 4, 4, 31);
    testing::AddConv(b, "right", "x", "a", 4, 4, 33);
  } else {
    b.Node("Neg", {"x"}, {"a"});
  }
  SetIntAttr(&b.Node("Concat", {convs ? "l" : "x", "a"}, {"c"}), "axis", 1);
  b.Node("Shape", {"c"}, {"sc"});
  b.Node("Slice", {"sc", "k0", "k1"}, {"n"});
  b.Node("Slice", {"sc", "k1", "k2"}, {"cc"});
  b.Node("Slice", {"sc", "k2", "k4"}, {"hw"});
  b.Node("Div", {"cc", "k2"}, {"half"});
  SetIntAttr(&b.Node("Concat", {"n", "k2", "half", "hw"}, {"s1"}), "axis", 0);
  b.Node("Reshape", {"c", "s1"}, {"r1"});
  SetIntsAttr(&b.Node("Transpose", {"r1"}, {"t"}, "shuffle"), "perm", {0, 2, 1, 3, 4});
  SetIntAttr(&b.Node("Concat", {"n", "m1", "hw"}, {"s2"}), "axis", 0);
  b.Node("Reshape", {"t", "s2"}, {"r2"});
  b.Node("Shape", {"r2"}, {"sr"});
  b.Node("Slice", {"sr", "k1", "k2"}, {"c2"});
  b.Node("Div", {"c2", "k2"}, {"h2"});
  b.Node("Mul", {"h2", "k2"}, {"e2"});
  b.Node("Slice", {"r2", "k0", "h2", "k1"}, {"y0"});
  b.Node("Slice", {"r2", "h2", "e2", "k1"}, {"y1"});
  b.Output("y0", {-1, 4, 3, 5}).Output("y1", {-1, 4, 3, 5});
  return b.Bytes();
}

TEST_F(FusionLayoutTest, ChannelShuffleAndSplitMoveOnce) {
  const std::vector<float> x = RandomFloats(2 * 4 * 15, 3);
  std::vector<std::vector<float>> out;
  auto model = LoadSame(ShuffleUnit(), FloatTensor({2, 4, 3, 5}, x), &out);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  // One node moves the elements; the two Shape nodes became its shape_of form.
  EXPECT_EQ(CountOps(g, kFusedTransposeOp), 3);
  EXPECT_EQ(CountOps(g, "Transpose"), 0);
  EXPECT_EQ(CountOps(g, "Reshape"), 0);
  EXPECT_EQ(CountOps(g, "Shape"), 0);
  EXPECT_EQ(CountOps(g, "Concat"), 2);  // the two shape vectors
  EXPECT_EQ(CountOps(g, "Slice"), 4);   // of the shape vectors only
  // Shuffled channel j of the concatenation [x, -x] is channel (j % 2) * 4 + j / 2; the first
  // half goes to y0, the second to y1.
  ASSERT_EQ(out.size(), 2u);
  for (size_t half = 0; half < 2; ++half) {
    ASSERT_EQ(out[half].size(), x.size());
    for (int n = 0; n < 2; ++n) {
      for (int j = 0; j < 4; ++j) {
        const int shuffled = static_cast<int>(half) * 4 + j;
        const int from = shuffled / 2;  // channel of x
        const float sign = shuffled % 2 == 0 ? 1.0f : -1.0f;
        for (int e = 0; e < 15; ++e) {
          ASSERT_EQ(out[half][(n * 4 + j) * 15 + e], sign * x[(n * 4 + from) * 15 + e])
              << "output " << half << " n " << n << " channel " << j << " element " << e;
        }
      }
    }
  }
}

// The unit's Concat of two convolutions (which could join the convolutions' chain as a fused
// concatenation) is left to the channel shuffle, which moves its elements once.
TEST_F(FusionLayoutTest, AShuffleTakesAConcatenationOfConvolutions) {
  const TensorValue x = FloatTensor({2, 4, 3, 5}, RandomFloats(2 * 4 * 15, 35));
  auto model = LoadBothWithin(ShuffleUnit(/*convs=*/true), x, 1e-5f);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedConcatOp), 0);
  EXPECT_EQ(CountOps(g, "Concat"), 2);  // the two shape vectors
  EXPECT_EQ(CountOps(g, "Transpose"), 0);
  EXPECT_EQ(CountOps(g, kernels::cpu::kFusedConvOp), 2);
}

// Concat along axis 1, a Transpose that keeps the last axis, and Slices with steps, one of them
// reversing the last axis (element by element). `rows` sets the size: the small graph's copies
// are listed at Prepare, the large one's (one element each, too many to list) are walked.
std::string StridedSlices(int64_t rows) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, rows, 6});
  b.Int64Init("start0", {1}, {1}).Int64Init("end0", {1}, {2 * rows}).Int64Init("axis0", {1}, {0});
  b.Int64Init("step0", {1}, {3});
  b.Int64Init("start1", {2}, {-1, 4}).Int64Init("end1", {2}, {-1000, -1000});
  b.Int64Init("axes1", {2}, {0, 2}).Int64Init("steps1", {2}, {-4, -1});
  b.Node("Neg", {"x"}, {"a"});
  SetIntAttr(&b.Node("Concat", {"x", "a"}, {"c"}), "axis", 1);
  SetIntsAttr(&b.Node("Transpose", {"c"}, {"t"}), "perm", {1, 0, 2});
  b.Node("Slice", {"t", "start0", "end0", "axis0", "step0"}, {"y0"});
  b.Node("Slice", {"t", "start1", "end1", "axes1", "steps1"}, {"y1"});
  b.Output("y0", {-1, 2, 6}).Output("y1", {-1, 2, 5});
  return b.Bytes();
}

TEST_F(FusionLayoutTest, StridedAndReversedSlices) {
  for (int64_t rows : {5, 400}) {
    SCOPED_TRACE(rows);
    std::vector<std::vector<float>> out;
    auto model = LoadSame(StridedSlices(rows),
                          FloatTensor({2, rows, 6}, RandomFloats(2 * rows * 6, 5)), &out);
    ASSERT_NE(model, nullptr);
    const Graph& g = model->graph();
    EXPECT_EQ(CountOps(g, kFusedTransposeOp), 1);
    EXPECT_EQ(CountOps(g, "Concat") + CountOps(g, "Transpose") + CountOps(g, "Slice"), 0);
    ASSERT_EQ(out.size(), 2u);
    // y0: rows 1, 4, ... of the 2 * rows; y1: rows 2 * rows - 1, -5, ... with 5 of 6 columns.
    EXPECT_EQ(out[0].size(), static_cast<size_t>((2 * rows - 2) / 3 + 1) * 12);
    EXPECT_EQ(out[1].size(), static_cast<size_t>((2 * rows - 1) / 4 + 1) * 10);
  }
}

TEST_F(FusionLayoutTest, ValuesReadElsewhereStay) {
  // The concatenation is also reduced, and a second Transpose moves the last axis: the first
  // Concat stays a value (only the Slice joins the Transpose), the second Transpose stays.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 5, 6});
  b.Int64Init("s", {1}, {1}).Int64Init("e", {1}, {4}).Int64Init("ax", {1}, {0});
  b.Node("Neg", {"x"}, {"a"});
  SetIntAttr(&b.Node("Concat", {"x", "a"}, {"c"}), "axis", 1);
  b.Node("ReduceSum", {"c"}, {"sum"});
  SetIntsAttr(&b.Node("Transpose", {"c"}, {"t"}), "perm", {1, 0, 2});
  b.Node("Slice", {"t", "s", "e", "ax"}, {"y"});
  SetIntsAttr(&b.Node("Transpose", {"c"}, {"u"}), "perm", {0, 2, 1});
  SetIntAttr(&b.Node("Concat", {"u", "u"}, {"z"}), "axis", 1);
  b.Output("y", {3, 2, 6}).Output("sum", {1, 1, 1}).Output("z", {2, 12, 10});
  std::vector<std::vector<float>> out;
  auto model = LoadSame(b.Bytes(), FloatTensor({2, 5, 6}, RandomFloats(60, 9)), &out);
  ASSERT_NE(model, nullptr);
  const Graph& g = model->graph();
  EXPECT_EQ(CountOps(g, kFusedTransposeOp), 1);
  EXPECT_EQ(CountOps(g, "Concat"), 2);
  EXPECT_EQ(CountOps(g, "Transpose"), 1);
  EXPECT_EQ(CountOps(g, "Slice"), 0);
}

}  // namespace
}  // namespace reprise::runtime::engine
