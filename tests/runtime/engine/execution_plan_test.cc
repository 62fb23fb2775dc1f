#include "runtime/engine/execution_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/fused_ops.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

class ExecutionPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok());
    testing::RegisterFakeShapeKernels(&registry_);
  }
  KernelRegistry registry_;
};

std::vector<float> Iota(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

TEST_F(ExecutionPlanTest, EvaluatesShapeSubgraphsAtPlanTime) {
  // y = Reshape(x, Concat(Gather(Shape(x), [0]), [-1])) + bias: a flatten whose target shape
  // depends on the batch size.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 2, 3}).Output("y", {-1, 6});
  b.Int64Init("idx", {1}, {0}).Int64Init("minus_one", {1}, {-1});
  b.FloatInit("bias", {6}, {0, 100, 200, 300, 400, 500});
  b.Node("Shape", {"x"}, {"shape"});
  b.Node("Gather", {"shape", "idx"}, {"batch"});
  b.Node("Concat", {"batch", "minus_one"}, {"target"});
  testing::SetIntAttr(b.proto().mutable_graph()->mutable_node(2), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"flat"});
  b.Node("Add", {"flat", "bias"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();

  for (int64_t batch : {1, 3}) {
    auto plan = (*model)->Plan({{batch, 2, 3}});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ((*plan)->folded_nodes(), 3);  // Shape, Gather, Concat
    EXPECT_EQ((*plan)->view_nodes(), 1);    // the Reshape reads the input's buffer
    ASSERT_EQ((*plan)->steps().size(), 1u);
    EXPECT_EQ((*plan)->steps()[0].op, "Add");
    ASSERT_EQ((*plan)->outputs().size(), 1u);
    EXPECT_EQ((*plan)->outputs()[0].shape, (Shape{batch, 6}));
    const size_t n = static_cast<size_t>(batch * 6);
    TensorValue x = FloatTensor({batch, 2, 3}, Iota(n, 0, 1));
    auto out = (*plan)->Run({&x});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = static_cast<float>(i) + 100.0f * (i % 6);
    EXPECT_EQ(Floats((*out)[0].value), expected);
  }
}

TEST_F(ExecutionPlanTest, ReshapeFamilyNodesAreViewsUnlessTheyAreGraphOutputs) {
  // a = x + 1; f = Flatten(a); u = Unsqueeze(f, 0); s = Squeeze(u, 0); y = s * 2; the
  // Reshape r of y is a graph output and must have its own buffer.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 2, 3}).Output("y", {2, 6}).Output("r", {12});
  b.FloatInit("one", {1}, {1}).FloatInit("two", {1}, {2});
  b.Int64Init("zero", {1}, {0}).Int64Init("flat", {1}, {12});
  b.Node("Add", {"x", "one"}, {"a"});
  b.Node("Flatten", {"a"}, {"f"});
  b.Node("Unsqueeze", {"f", "zero"}, {"u"});
  b.Node("Squeeze", {"u", "zero"}, {"s"});
  b.Node("Mul", {"s", "two"}, {"y"});
  b.Node("Reshape", {"y", "flat"}, {"r"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2, 2, 3}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->view_nodes(), 3);
  std::vector<std::string> ops;
  for (const PlanStep& step : (*plan)->steps()) ops.push_back(step.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Add", "Mul", "Reshape"}));
  // The Mul reads the Add's buffer through the three views.
  EXPECT_EQ((*plan)->steps()[1].inputs[0], (*plan)->steps()[0].outputs[0]);
  TensorValue x = FloatTensor({2, 2, 3}, Iota(12, 0, 1));
  auto out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> expected(12);
  for (size_t i = 0; i < 12; ++i) expected[i] = 2.0f * (static_cast<float>(i) + 1.0f);
  EXPECT_EQ((*out)[0].value.shape, (Shape{2, 6}));
  EXPECT_EQ(Floats((*out)[0].value), expected);
  EXPECT_EQ((*out)[1].value.shape, (Shape{12}));
  EXPECT_EQ(Floats((*out)[1].value), expected);
}

TEST_F(ExecutionPlanTest, ACastToTheTypeItsInputHasIsAViewAndAnotherCastIsAStep) {
  // a = x + 1; c = Cast(a, float) reads a's buffer; y = c * 2; i = Cast(c, int32), of the same
  // element size but another type, is a step of its own.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 3})
      .Output("y", {2, 3})
      .Output("i", {2, 3}, onnx::TensorProto::INT32);
  b.FloatInit("one", {1}, {1}).FloatInit("two", {1}, {2});
  b.Node("Add", {"x", "one"}, {"a"});
  testing::SetIntAttr(&b.Node("Cast", {"a"}, {"c"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"c", "two"}, {"y"});
  testing::SetIntAttr(&b.Node("Cast", {"c"}, {"i"}), "to", onnx::TensorProto::INT32);
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2, 3}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->view_nodes(), 1);
  std::vector<std::string> ops;
  for (const PlanStep& step : (*plan)->steps()) ops.push_back(step.op);
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"Add", "Cast", "Mul"}));
  TensorValue x = FloatTensor({2, 3}, {-2.5f, -1, 0, 0.5f, 3, 7.25f});
  auto out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{-3, 0, 2, 3, 8, 16.5f}));
  ASSERT_EQ((*out)[1].value.dtype, DataType::kInt32);
  std::vector<int32_t> ints(6);
  std::memcpy(ints.data(), (*out)[1].value.bytes.data(), sizeof(int32_t) * 6);
  EXPECT_EQ(ints, (std::vector<int32_t>{-1, 0, 1, 1, 4, 8}));
}

TEST_F(ExecutionPlanTest, RunsGraphsOfBinaryOpsEagerly) {
  // A diamond with broadcasting: a = x + w; b = a * x; c = b - a; y = c / w.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4}).Output("a", {-1, 4});
  b.FloatInit("w", {4}, {1, 2, 4, 8});
  b.Node("Add", {"x", "w"}, {"a"});
  b.Node("Mul", {"a", "x"}, {"b"});
  b.Node("Sub", {"b", "a"}, {"c"});
  b.Node("Div", {"c", "w"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{3, 4}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->steps().size(), 4u);

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> xs(12);
  for (float& v : xs) v = dist(rng);
  TensorValue x = FloatTensor({3, 4}, xs);
  auto out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok()) << out.status();
  const float w[4] = {1, 2, 4, 8};
  std::vector<float> y = Floats((*out)[0].value);
  std::vector<float> a = Floats((*out)[1].value);
  ASSERT_EQ(y.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    const float ea = xs[i] + w[i % 4];
    const float eb = ea * xs[i];
    EXPECT_FLOAT_EQ(a[i], ea);
    EXPECT_FLOAT_EQ(y[i], (eb - ea) / w[i % 4]) << i;
  }
  // Running again with other values reuses the plan and gives the new result.
  for (float& v : xs) v = 1;
  x = FloatTensor({3, 4}, xs);
  out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok());
  EXPECT_FLOAT_EQ(Floats((*out)[0].value)[1], (3.0f * 1 - 3.0f) / 2);
}

TEST_F(ExecutionPlanTest, ArenaReusesMemoryAndLiveTensorsDoNotOverlap) {
  // A chain of 8 Adds over [N,256] floats: only two intermediates are live at a time.
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 256}).Output("y", {-1, 256});
  std::string prev = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string out = i == 7 ? "y" : absl::StrCat("t", i);
    b.Node(i % 2 ? "Mul" : "Add", {prev, "x"}, {out});
    prev = out;
  }
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2, 256}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const size_t one = 2 * 256 * sizeof(float);
  EXPECT_EQ((*plan)->intermediate_bytes(), 7 * one);
  EXPECT_EQ((*plan)->arena_bytes(), 2 * one);
  EXPECT_LE((*plan)->arena_bytes(), (*plan)->intermediate_bytes());
  // Each step's output never aliases one of its inputs (they are live at the same time).
  for (const PlanStep& step : (*plan)->steps()) {
    for (const void* in : step.inputs) EXPECT_NE(in, step.outputs[0]);
  }
  std::vector<float> xs = Iota(512, -1, 0.01f);
  TensorValue x = FloatTensor({2, 256}, xs);
  auto out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> y = Floats((*out)[0].value);
  for (size_t i = 0; i < xs.size(); ++i) {
    float v = xs[i];
    for (int k = 0; k < 8; ++k) v = k % 2 ? v * xs[i] : v + xs[i];
    EXPECT_FLOAT_EQ(y[i], v) << i;
  }
}

// y = Neg(Relu(x)) and a small z = x[0, :8] + 1: steps with a buffer of 128 KiB or more clear it
// first in plans of two threads (kernels/cpu/output_clearing.h), by the registry's option.
TEST(ExecutionPlanClearingTest, MultiThreadPlansClearTheirLargeBuffersFirst) {
  constexpr int64_t kWide = 40000;  // 160000 bytes
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, kWide}).Output("y", {1, kWide}).Output("z", {1, 8});
  b.Int64Init("starts", {1}, {0}).Int64Init("ends", {1}, {8}).Int64Init("axes", {1}, {1});
  b.FloatInit("one", {1}, {1.0f});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("Neg", {"r"}, {"y"});
  b.Node("Slice", {"x", "starts", "ends", "axes"}, {"s"});
  b.Node("Add", {"s", "one"}, {"z"});
  const std::vector<float> xs = testing::RandomFloats(kWide, 7);
  TensorValue x = FloatTensor({1, kWide}, xs);
  std::vector<float> y(kWide);
  for (int64_t i = 0; i < kWide; ++i) y[i] = -std::max(xs[i], 0.0f);
  std::vector<float> z(8);
  for (int i = 0; i < 8; ++i) z[i] = xs[i] + 1.0f;

  struct Case {
    kernels::cpu::OutputClearing mode;
    int threads;
    const char* suffix;  // of the large steps' implementation(), "" for none
  };
  for (const Case& c :
       {Case{kernels::cpu::OutputClearing::kOn, 2, " (buffers cleared first)"},
        Case{kernels::cpu::OutputClearing::kAuto, 2, " (buffers cleared first where faster)"},
        Case{kernels::cpu::OutputClearing::kOn, 1, ""},
        Case{kernels::cpu::OutputClearing::kOff, 2, ""}}) {
    SCOPED_TRACE(
        absl::StrCat(kernels::cpu::OutputClearingName(c.mode), ", ", c.threads, " threads"));
    KernelRegistry registry;
    kernels::cpu::CpuKernelOptions options;
    options.clear_outputs = c.mode;
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry, options).ok());
    auto model = Model::LoadBytes(b.Bytes(), registry);
    ASSERT_TRUE(model.ok()) << model.status();
    auto plan = (*model)->Plan({{1, kWide}}, {}, c.threads);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const bool clears = c.suffix[0] != '\0';
    int cleared = 0;
    for (const PlanStep& step : (*plan)->steps()) {
      const std::string impl = step.kernel->implementation();
      const bool large = step.op == "Relu" || step.op == "Neg";
      const bool wrapped = absl::StrContains(impl, "(buffers cleared first");
      EXPECT_EQ(wrapped, large && clears) << step.op << ": " << impl;
      if (wrapped) {
        EXPECT_TRUE(absl::EndsWith(impl, c.suffix)) << impl;
      }
      cleared += wrapped;
    }
    EXPECT_EQ(cleared, clears ? 2 : 0);
    for (int run = 0; run < 12; ++run) {  // past auto's untimed and measured runs
      auto out = (*plan)->Run({&x});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(Floats((*out)[0].value), y) << "run " << run;
      ASSERT_EQ(Floats((*out)[1].value), z) << "run " << run;
    }
  }
}

// m = Conv(x) + r (the Add becomes a fused conv's residual), then a last Conv. Where r is a
// Conv's output (in the same channel-blocked layout as m's) that nothing reads after the Add,
// the fused conv writes its output over r's buffer (no copy). Not where something reads r later
// (kReadLater: a Conv of r is a second output), nor where r is stored otherwise (kPlain: r =
// Neg(x), plain NCHW, which the conv reorders into its blocked output). In every case, at one
// and two threads, buffers cleared first or not, the results are those of the plain graph (no
// fused convs).
TEST(ExecutionPlanInPlaceTest, ResidualConvWritesOverItsResidualWhenNothingReadsItLater) {
  constexpr int64_t kC = 16, kH = 48, kW = 48;  // 147456-byte tensors: large enough to clear
  enum class Residual { kInPlace, kReadLater, kPlain };
  for (const Residual residual : {Residual::kInPlace, Residual::kReadLater, Residual::kPlain}) {
    const bool in_place = residual == Residual::kInPlace;
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {1, kC, kH, kW}).Output("y", {1, kC, kH, kW});
    if (residual == Residual::kReadLater) b.Output("nr", {1, kC, kH, kW});
    for (const char* name : {"r", "m", "f", "g"}) {
      b.FloatInit(absl::StrCat(name, "_w"), {kC, kC, 1, 1},
                  testing::RandomFloats(kC * kC, name[0], -0.25f, 0.25f));
      b.FloatInit(absl::StrCat(name, "_b"), {kC}, testing::RandomFloats(kC, name[0] + 1));
    }
    if (residual == Residual::kPlain) {
      b.Node("Neg", {"x"}, {"r"});
    } else {
      b.Node("Conv", {"x", "r_w", "r_b"}, {"r"}, "r");
    }
    b.Node("Conv", {"x", "m_w", "m_b"}, {"m0"}, "m");
    b.Node("Add", {"m0", "r"}, {"sum"});
    b.Node("Relu", {"sum"}, {"block"});
    b.Node("Conv", {"block", "f_w", "f_b"}, {"y"}, "f");
    if (residual == Residual::kReadLater) b.Node("Conv", {"r", "g_w", "g_b"}, {"nr"}, "g");
    const TensorValue x =
        FloatTensor({1, kC, kH, kW}, testing::RandomFloats(kC * kH * kW, 5, -1.0f, 1.0f));

    KernelRegistry all, plain;
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&all).ok());
    for (const std::string& op : all.Ops()) {
      if (op != kernels::cpu::kFusedConvOp) {
        ASSERT_TRUE(plain.Register(op, all.Find(op)).ok());
      }
    }
    auto plain_model = Model::LoadBytes(b.Bytes(), plain);
    ASSERT_TRUE(plain_model.ok()) << plain_model.status();
    auto want_plan = (*plain_model)->Plan({{1, kC, kH, kW}});
    ASSERT_TRUE(want_plan.ok()) << want_plan.status();
    auto want = (*want_plan)->Run({&x});
    ASSERT_TRUE(want.ok()) << want.status();

    for (const auto mode : {kernels::cpu::OutputClearing::kOn, kernels::cpu::OutputClearing::kOff,
                            kernels::cpu::OutputClearing::kAuto}) {
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(absl::StrCat("residual case ", static_cast<int>(residual), ", ",
                                  kernels::cpu::OutputClearingName(mode), ", ", threads,
                                  " threads"));
        KernelRegistry registry;
        kernels::cpu::CpuKernelOptions options;
        options.clear_outputs = mode;
        ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry, options).ok());
        auto model = Model::LoadBytes(b.Bytes(), registry);
        ASSERT_TRUE(model.ok()) << model.status();
        auto plan = (*model)->Plan({{1, kC, kH, kW}}, {}, threads);
        ASSERT_TRUE(plan.ok()) << plan.status();
        EXPECT_EQ((*plan)->in_place_steps(), in_place ? 1 : 0);
        int with_residual = 0;
        for (const PlanStep& step : (*plan)->steps()) {
          if (step.inputs.size() != 4) continue;
          ++with_residual;
          EXPECT_EQ(step.outputs[0] == step.inputs[3], in_place);
        }
        EXPECT_EQ(with_residual, 1);
        for (int run = 0; run < 12; ++run) {  // past auto's untimed and measured runs
          auto got = (*plan)->Run({&x});
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(got->size(), want->size());
          for (size_t o = 0; o < got->size(); ++o) {
            const std::vector<float> g = Floats((*got)[o].value), w = Floats((*want)[o].value);
            ASSERT_EQ(g.size(), w.size());
            for (size_t i = 0; i < g.size(); ++i) {
              ASSERT_NEAR(g[i], w[i], 1e-4f * (1.0f + std::fabs(w[i])))
                  << "run " << run << " output " << o << " at " << i;
            }
          }
        }
      }
    }
  }
}

TEST_F(ExecutionPlanTest, StepPointersAreInsideThePlansBuffers) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {4}).Output("y", {4});
  b.Node("Add", {"x", "x"}, {"a"});
  b.Node("Mul", {"a", "a"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok());
  auto plan = (*model)->Plan({{4}});
  ASSERT_TRUE(plan.ok());
  const auto& steps = (*plan)->steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].inputs[0], (*plan)->inputs()[0].data);  // the staging buffer
  EXPECT_EQ(steps[0].outputs[0], steps[1].inputs[0]);        // the arena slot of "a"
  EXPECT_EQ(steps[1].outputs[0], (*plan)->outputs()[0].data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(steps[0].outputs[0]) % kBufferAlignment, 0u);
  int visited = 0;
  ASSERT_TRUE((*plan)
                  ->ForEachStep([&](const PlanStep& step) {
                    ++visited;
                    return step.kernel != nullptr ? absl::OkStatus()
                                                  : absl::InternalError("null kernel");
                  })
                  .ok());
  EXPECT_EQ(visited, 2);
}

TEST_F(ExecutionPlanTest, OutputsThatAreInputsOrInitializers) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("x", {2}).Output("w", {2}).Output("y", {2});
  b.FloatInit("w", {2}, {5, 6});
  b.Node("Add", {"x", "w"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  TensorValue x = FloatTensor({2}, {1, 2});
  auto out = (*plan)->Run({&x});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{1, 2}));
  EXPECT_EQ(Floats((*out)[1].value), (std::vector<float>{5, 6}));
  EXPECT_EQ(Floats((*out)[2].value), (std::vector<float>{6, 8}));
}

TEST_F(ExecutionPlanTest, RefusesShapesTheModelCannotTake) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 3}).Input("z", onnx::TensorProto::FLOAT, {-1, 3});
  b.Output("y", {-1, 3});
  b.Node("Add", {"x", "z"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2, 4}, {2, 3}});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("input \"x\" has shape [2,4], expected [N,3]"));
  plan = (*model)->Plan({{2, 3}, {5, 3}});  // both dims are "N"
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("input \"z\""));
  EXPECT_THAT(plan.status().message(), HasSubstr("N=2"));
  plan = (*model)->Plan({{2, 3}});
  EXPECT_FALSE(plan.ok());
  // A kernel refusing its inputs names the node.
  ModelBuilder bad;
  bad.Input("x", onnx::TensorProto::FLOAT, {-1}, "").Input("z", onnx::TensorProto::FLOAT, {-1}, "");
  bad.Output("y", {-1});
  bad.Node("Add", {"x", "z"}, {"y"}, "the_add");
  model = Model::LoadBytes(bad.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  plan = (*model)->Plan({{2}, {3}});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("\"the_add\" (Add)"));
}

}  // namespace
}  // namespace reprise::runtime::engine
