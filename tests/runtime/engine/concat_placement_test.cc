// Concatenations at batch 1 whose producers write their pieces in place inside the
// concatenation's buffer (PreparedKernel::input_offsets_in_output, the planner's
// PlaceInputsInOutput), and concatenations that are views of pieces placed for a later one
// (ViewConcatenationsOfPlacedPieces). The reference is the same model at batch 2, whose
// concatenations copy (each image one run per input is no longer contiguous), on two copies of the
// input image.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::AddSameConv;
using testing::Floats;
using testing::FloatTensor;
using testing::LaneClashes;
using testing::ModelBuilder;
using testing::RandomFloats;

// 30 x 30 planes: a channel of 3600 bytes, so that plain pieces of odd widths fall off the
// 64-byte alignment that a placed piece keeps; the concatenations of 16-channel pieces pass the
// size from which a two-thread plan may clear outputs first (kClearOutputMinBytes).
constexpr int64_t kC = 16, kSide = 30;

void AddConcat(ModelBuilder& b, const std::vector<std::string>& in, const std::string& out) {
  auto& node = b.Node("Concat", in, {out}, out);
  testing::SetIntAttr(&node, "axis", 1);
}

// Four branches (two convs and a pooled conv stored in channel blocks, Neg's output plain)
// concatenated; that concatenation and a fifth branch concatenated again (nested); two branches
// read again after both (z); one value concatenated with itself (twice); a concatenation of
// plain ops at a width of 5 channels (pieces of 18000 bytes: the second and third at offsets
// that are not multiples of 64); a plain concatenation whose second piece ends a chain of
// values that die before it and whose third piece is read again after it. A dense block
// (DenseNet's): the block's features concatenated after each layer, each concatenation a prefix
// of the next, the first read again after the last one's reader, and two of the features
// concatenated in the other order.
std::string BranchyModel() {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, kC, kSide, kSide});
  AddSameConv(b, "a", "x", "a", kC, 16, 1, 1);
  AddSameConv(b, "b", "x", "b", kC, 32, 3, 3);
  b.Node("Neg", {"x"}, {"c"});
  auto& pool = b.Node("MaxPool", {"x"}, {"dp"}, "pool");
  testing::SetIntsAttr(&pool, "kernel_shape", {3, 3});
  testing::SetIntsAttr(&pool, "pads", {1, 1, 1, 1});
  AddSameConv(b, "d", "dp", "d", kC, 16, 1, 5);
  AddConcat(b, {"a", "b", "c", "d"}, "cat1");  // 80 channels
  b.Node("Sigmoid", {"x"}, {"e"});
  AddConcat(b, {"cat1", "e"}, "cat2");  // 96 channels
  AddSameConv(b, "y", "cat2", "y", 96, 8, 3, 7);
  b.Node("Relu", {"x"}, {"f"});
  AddConcat(b, {"f", "f"}, "twice");
  AddSameConv(b, "g", "twice", "g", 2 * kC, 8, 1, 9);
  b.Node("Add", {"a", "d"}, {"z"});
  b.FloatInit("five_w", {5, kC, 1, 1}, RandomFloats(5 * kC, 11, -0.25f, 0.25f));
  b.Node("Conv", {"x", "five_w"}, {"p5"}, "five");
  b.Node("Abs", {"p5"}, {"q5"});
  b.Node("Exp", {"p5"}, {"r5"});
  AddConcat(b, {"p5", "q5", "r5"}, "odd");
  b.Node("Tanh", {"odd"}, {"t"});
  b.Node("Softplus", {"x"}, {"sp"});
  // Values that die before the concatenation runs: the arena reuses their bytes, which must
  // not be those where sp waits.
  b.Node("Relu", {"x"}, {"h1"});
  b.Node("Abs", {"h1"}, {"h2"});
  b.Node("Neg", {"h2"}, {"h3"});
  b.Node("Floor", {"h3"}, {"fl"});
  b.Node("Exp", {"x"}, {"ex"});
  AddConcat(b, {"sp", "fl", "ex"}, "plain");
  b.Node("Neg", {"plain"}, {"n"});
  b.Node("Sin", {"ex"}, {"late"});
  AddSameConv(b, "k0", "x", "k0", kC, 16, 1, 13);
  AddSameConv(b, "k1", "k0", "k1", 16, 16, 3, 15);
  AddConcat(b, {"k0", "k1"}, "dense1");
  AddConcat(b, {"k1", "k0"}, "swapped");
  AddSameConv(b, "k2", "dense1", "k2", 32, 16, 1, 17);
  AddConcat(b, {"k0", "k1", "k2"}, "dense2");
  AddSameConv(b, "k3", "dense2", "k3", 48, 16, 3, 19);
  AddConcat(b, {"k0", "k1", "k2", "k3"}, "dense3");
  AddSameConv(b, "dense", "dense3", "dense", 64, 8, 1, 23);
  AddSameConv(b, "sw", "swapped", "sw", 32, 8, 1, 25);
  // dense1 read again after dense3's last reader, summed with values made from that reader's
  // output (so that no order of the nodes reads it earlier), one of them too large for the
  // arena's bytes below the block's buffer.
  AddSameConv(b, "m4", "dense", "m4", 8, 256, 1, 27);
  AddSameConv(b, "m5", "m4", "m5", 256, 64, 1, 29);
  AddSameConv(b, "m6", "m5", "m6", 64, 32, 1, 31);
  b.Node("Add", {"dense1", "m6"}, {"dm"});
  AddSameConv(b, "dl", "dm", "dl", 32, 8, 1, 33);
  b.Output("y", {-1, 8, kSide, kSide})
      .Output("z", {-1, 16, kSide, kSide})
      .Output("g", {-1, 8, kSide, kSide})
      .Output("t", {-1, 15, kSide, kSide})
      .Output("n", {-1, 3 * kC, kSide, kSide})
      .Output("late", {-1, kC, kSide, kSide})
      .Output("dense", {-1, 8, kSide, kSide})
      .Output("sw", {-1, 8, kSide, kSide})
      .Output("dl", {-1, 8, kSide, kSide});
  return b.Bytes();
}

TEST(ConcatPlacementTest, PiecesWrittenInPlaceGiveTheCopiedResults) {
  const std::string model_bytes = BranchyModel();
  const std::vector<float> image = RandomFloats(kC * kSide * kSide, 21, -2.0f, 2.0f);
  std::vector<float> two = image;
  two.insert(two.end(), image.begin(), image.end());
  const TensorValue x1 = FloatTensor({1, kC, kSide, kSide}, image);
  const TensorValue x2 = FloatTensor({2, kC, kSide, kSide}, two);
  for (const int threads : {1, 2}) {
    for (const int branch_streams : {1, 4}) {
      for (const auto clearing :
           {kernels::cpu::OutputClearing::kOn, kernels::cpu::OutputClearing::kAuto}) {
        SCOPED_TRACE(absl::StrCat(threads, " threads, ", branch_streams, " branch streams, ",
                                  kernels::cpu::OutputClearingName(clearing)));
        KernelRegistry registry;
        kernels::cpu::CpuKernelOptions kernel_options;
        kernel_options.clear_outputs = clearing;
        ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry, kernel_options).ok());
        ModelOptions options;
        options.intra_op_threads = threads;
        options.max_branch_streams = branch_streams;
        auto model = Model::LoadBytes(model_bytes, registry, options);
        ASSERT_TRUE(model.ok()) << model.status();
        auto batch2 = (*model)->Plan({{2, kC, kSide, kSide}});
        ASSERT_TRUE(batch2.ok()) << batch2.status();
        EXPECT_EQ((*batch2)->placed_inputs(), 0);
        auto want = (*batch2)->Run({&x2});
        ASSERT_TRUE(want.ok()) << want.status();

        auto plan = (*model)->Plan({{1, kC, kSide, kSide}});
        ASSERT_TRUE(plan.ok()) << plan.status();
        // Per concatenation, which inputs its step reads at their offsets in its output.
        std::map<std::string, std::string> placed;
        int in_place = 0;
        for (const PlanStep& step : (*plan)->steps()) {
          const std::vector<size_t> offsets = step.kernel->input_offsets_in_output();
          for (size_t k = 0; k < offsets.size() && k < step.inputs.size(); ++k) {
            const bool here =
                offsets[k] != PreparedKernel::kNotInOutput &&
                step.inputs[k] == static_cast<const uint8_t*>(step.outputs[0]) + offsets[k];
            placed[step.node_name] += here ? "1" : "0";
            in_place += here ? 1 : 0;
          }
        }
        EXPECT_EQ(in_place, (*plan)->placed_inputs());
        // b, a conv's output in channel blocks, in cat1; a and d are also read by the Add, c is
        // Neg's: stored plain, they are reordered into cat1's blocks.
        EXPECT_EQ(placed["cat1"][1], '1');
        EXPECT_EQ(placed["cat2"], "10");   // cat1 nested in cat2; e (plain) reordered
        EXPECT_EQ(placed["twice"], "00");  // one value cannot sit at two offsets
        EXPECT_EQ(placed["odd"], "100");   // offsets 18000 and 36000 break the alignment
        // The dense block's features are written into its last concatenation; the earlier
        // ones are views of its first bytes. The swapped pair is not one of them.
        EXPECT_EQ(placed["dense3"], "1111");
        EXPECT_EQ(placed["dense2"], "111");
        EXPECT_EQ(placed["dense1"], "11");
        EXPECT_EQ(placed["swapped"], "00");
        // Plain ops into a plain concatenation; ex is read after it (by Sin), which would keep
        // the concatenation's buffer alive that long.
        EXPECT_EQ(placed["plain"], "110");
        // Steps on different lanes of a parallel region neither write what the other reads or
        // writes (a read's size is that of the latest write to its address).
        EXPECT_EQ((*plan)->parallel_regions().empty(), threads == 1 || branch_streams == 1);
        const std::vector<std::string> clashes = LaneClashes(**plan);
        EXPECT_TRUE(clashes.empty()) << absl::StrJoin(clashes, "\n");
        for (int run = 0; run < 3; ++run) {
          auto got = (*plan)->Run({&x1});
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(got->size(), want->size());
          for (size_t o = 0; o < got->size(); ++o) {
            const std::vector<float> g = Floats((*got)[o].value), w = Floats((*want)[o].value);
            ASSERT_EQ(g.size() * 2, w.size()) << "output " << o;
            for (size_t i = 0; i < g.size(); ++i) {
              // Image 0 and image 1 of the reference are the same image.
              ASSERT_EQ(w[i], w[i + g.size()]) << "output " << o << " at " << i;
              ASSERT_NEAR(g[i], w[i], 1e-4f * (1.0f + std::fabs(w[i])))
                  << "run " << run << " output " << o << " at " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace reprise::runtime::engine
