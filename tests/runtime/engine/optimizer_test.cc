#include "runtime/engine/optimizer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/model.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

class OptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok()); }

  std::vector<float> RunOne(const std::shared_ptr<const Model>& model, const TensorValue& x) {
    auto out = testing::RunPlan(*model, {{"x", x}});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok() || out->empty()) return {};
    return Floats((*out)[0].value);
  }

  KernelRegistry registry_;
};

TEST_F(OptimizerTest, FoldsConstantSubgraphs) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  b.FloatInit("w1", {2}, {1, 2}).FloatInit("w2", {2}, {10, 20});
  b.Node("Add", {"w1", "w2"}, {"s"});  // [11, 22]
  b.Node("Mul", {"s", "w1"}, {"m"});   // [11, 44]
  b.Node("Sub", {"x", "m"}, {"y"}, "only_runtime_node");
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->graph().nodes.size(), 1u);
  EXPECT_EQ((*model)->graph().nodes[0].name, "only_runtime_node");
  const Graph& g = (*model)->graph();
  const TensorValue* m = g.FindConstant(g.FindValue("m"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Floats(*m), (std::vector<float>{11, 44}));
  EXPECT_EQ(RunOne(*model, FloatTensor({2}, {100, 100})), (std::vector<float>{89, 56}));
}

TEST_F(OptimizerTest, FoldedGraphOutputIsStillReturned) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1}).Output("y", {1}).Output("k", {1});
  b.FloatInit("w", {1}, {3});
  b.Node("Mul", {"w", "w"}, {"k"});
  b.Node("Add", {"x", "k"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto out = testing::RunPlan(**model, {{"x", FloatTensor({1}, {1})}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name, "y");
  EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{10}));
  EXPECT_EQ((*out)[1].name, "k");
  EXPECT_EQ(Floats((*out)[1].value), (std::vector<float>{9}));
}

TEST_F(OptimizerTest, RemovesIdentityAndInferenceDropout) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("out", {2});
  b.FloatInit("w", {2}, {1, 1});
  b.Node("Identity", {"x"}, {"a"});
  b.Node("Dropout", {"a"}, {"b"});
  b.Node("Add", {"b", "w"}, {"c"});
  b.Node("Identity", {"c"}, {"out"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->stats().imported_nodes, 4);
  ASSERT_EQ((*model)->graph().nodes.size(), 1u);
  EXPECT_EQ((*model)->graph().nodes[0].op, "Add");
  // The graph output keeps its name though its value is now "c".
  EXPECT_EQ((*model)->outputs()[0].name, "out");
  EXPECT_EQ(RunOne(*model, FloatTensor({2}, {2, 3})), (std::vector<float>{3, 4}));
}

TEST_F(OptimizerTest, IdentityFromInputToOutput) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {3}).Output("y", {3});
  b.Node("Identity", {"x"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->graph().nodes.empty());
  EXPECT_EQ(RunOne(*model, FloatTensor({3}, {1, 2, 3})), (std::vector<float>{1, 2, 3}));
}

TEST_F(OptimizerTest, InferenceDropoutWithMaskGivesAnAllTrueMask) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 2});
  b.Output("y", {-1, 2}).Output("mask", {-1, 2}, onnx::TensorProto::BOOL);
  b.Node("Dropout", {"x"}, {"y", "mask"}, "drop");
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto out = testing::RunPlan(**model, {{"x", FloatTensor({3, 2}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*out)[1].value.dtype, DataType::kBool);
  EXPECT_EQ((*out)[1].value.shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[1].value.bytes, ValueBytes(6, 1));
}

TEST_F(OptimizerTest, TrainingDropoutIsRefused) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  b.FloatInit("ratio", {}, {0.5f});
  auto* training = b.proto().mutable_graph()->add_initializer();
  training->set_name("training");
  training->set_data_type(onnx::TensorProto::BOOL);
  training->add_int32_data(1);
  b.Node("Dropout", {"x", "ratio", "training"}, {"y"}, "drop");
  // Without a Dropout kernel the engine handles Dropout itself and refuses training mode.
  KernelRegistry engine_only;
  auto model = Model::LoadBytes(b.Bytes(), engine_only);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(model.status().message(), HasSubstr("\"drop\" (Dropout)"));

  // With the CPU kernels, their Dropout kernel refuses it when the plan is made.
  model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->Plan({{2}});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("\"drop\""));

  // A ratio of 0 drops nothing, even in training mode.
  b.proto().mutable_graph()->mutable_initializer(0)->set_float_data(0, 0.0f);
  model = Model::LoadBytes(b.Bytes(), engine_only);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->graph().nodes.empty());
}

TEST_F(OptimizerTest, RemovesDeadNodes) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  b.Node("Add", {"x", "x"}, {"unused1"});
  b.Node("Mul", {"unused1", "x"}, {"unused2"});
  b.Node("Sub", {"x", "x"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->graph().nodes.size(), 1u);
  EXPECT_EQ((*model)->graph().nodes[0].op, "Sub");
}

TEST_F(OptimizerTest, FoldingErrorNamesTheNode) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2}).Output("y", {2});
  b.FloatInit("w1", {2}, {1, 2}).FloatInit("w3", {3}, {1, 2, 3});
  b.Node("Add", {"w1", "w3"}, {"bad"}, "bad_add");  // [2] and [3] do not broadcast
  b.Node("Add", {"x", "bad"}, {"y"});
  // ONNX shape inference already refuses nothing here (no strict mode); the fold does.
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("bad_add"));
}

// A kernel that stores its output padded (as channel blocks do) cannot give a plan-time value:
// EvaluateOnHost refuses it rather than cut the padded bytes to the dense size.
TEST(EvaluateOnHostTest, RefusesAnOutputStoredPadded) {
  class PaddedKernel final : public PreparedKernel {
   public:
    explicit PaddedKernel(size_t stored) : stored_(stored) {}
    absl::string_view op() const override { return "Padded"; }
    const std::vector<TensorDesc>& outputs() const override { return outputs_; }
    size_t output_storage_bytes(size_t i) const override { return i == 0 ? stored_ : 0; }
    absl::Status Run(const KernelArgs& args) const override {
      std::memset(args.outputs[0], 0, std::max<size_t>(stored_, 12));
      return absl::OkStatus();
    }

   private:
    std::vector<TensorDesc> outputs_ = {TensorDesc{DataType::kFloat32, {3}, nullptr, true}};
    size_t stored_;
  };
  auto padded = EvaluateOnHost(PaddedKernel(16), {});
  ASSERT_FALSE(padded.ok());
  EXPECT_EQ(padded.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(padded.status().message(), HasSubstr("stored in 16 bytes, not the 12"));
  auto dense = EvaluateOnHost(PaddedKernel(12), {});
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(Floats((*dense)[0]), (std::vector<float>{0, 0, 0}));
}

}  // namespace
}  // namespace reprise::runtime::engine
