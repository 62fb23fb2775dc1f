// Models cut at their value-dependent nodes (value_split.h): the part in front of them is
// replayed, the rest planned per input, and the results are those of the whole model.
#include "runtime/engine/value_split.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::FloatTensor;
using testing::ModelBuilder;

class ValueSplitTest : public runtime::testing::CoreTest {
 protected:
  std::shared_ptr<const Model> Load(const ModelBuilder& b, bool split) {
    ModelOptions options;
    options.split_at_value_dependent_nodes = split;
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels(), options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }
  std::unique_ptr<StreamSession> NewSession(std::shared_ptr<const Model> model) {
    auto session = StreamSession::Create(std::move(model), device_, ExecMode::kReplay);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }
};

// r = Relu(x) (an output, and read by the tail); z = NonZero(r); o = y + the sum of z's indices
// (the tail reads the graph input y).
ModelBuilder CutModel() {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 40}).Input("y", onnx::TensorProto::FLOAT, {3});
  b.Output("z", {2, -1}, onnx::TensorProto::INT64).Output("r", {2, 40}).Output("o", {3});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("NonZero", {"r"}, {"z"});
  testing::SetIntAttr(&b.Node("Cast", {"z"}, {"zf"}), "to", onnx::TensorProto::FLOAT);
  testing::SetIntAttr(&b.Node("ReduceSum", {"zf"}, {"s"}), "keepdims", 0);
  b.Node("Add", {"y", "s"}, {"o"});
  return b;
}

std::vector<NamedTensor> CutInputs(const std::vector<int>& positive, float y0) {
  std::vector<float> x(80, -1.0f);
  for (int p : positive) x[p] = 0.5f * static_cast<float>(p + 1);
  return {{"x", FloatTensor({2, 40}, std::move(x))}, {"y", FloatTensor({3}, {y0, 1, 2})}};
}

TEST_F(ValueSplitTest, TheNodesInFrontOfAValueDependentNodeAreReplayed) {
  const ModelBuilder b = CutModel();
  std::shared_ptr<const Model> cut = Load(b, true);
  std::shared_ptr<const Model> whole = Load(b, false);
  ASSERT_NE(cut, nullptr);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->value_split(), nullptr);
  const Model::SplitModels* split = cut->value_split();
  ASSERT_NE(split, nullptr);
  // The prefix has Relu alone and hands r to the tail; the tail also reads y (input 1).
  EXPECT_EQ(split->prefix->graph().nodes.size(), 1u);
  EXPECT_FALSE(split->prefix->keyed_by_all_values());
  EXPECT_TRUE(split->tail->keyed_by_all_values());
  EXPECT_EQ(split->frontier, 1u);
  EXPECT_EQ(split->tail_graph_inputs, (std::vector<size_t>{1}));
  ASSERT_EQ(split->outputs.size(), 3u);
  EXPECT_TRUE(split->outputs[0].tail);   // z
  EXPECT_FALSE(split->outputs[1].tail);  // r
  EXPECT_EQ(split->outputs[1].index, 1u);
  EXPECT_TRUE(split->outputs[2].tail);  // o

  auto cut_session = NewSession(cut);
  auto whole_session = NewSession(whole);
  ASSERT_NE(cut_session, nullptr);
  ASSERT_NE(whole_session, nullptr);
  const std::vector<std::vector<NamedTensor>> runs = {
      CutInputs({5}, 20), CutInputs({0, 41, 79}, 10), CutInputs({0, 41, 79}, 10),
      CutInputs({7, 8}, 30), CutInputs({1}, 40)};
  for (size_t k = 0; k < runs.size(); ++k) {
    SCOPED_TRACE(k);
    StreamRunInfo info;
    auto got = cut_session->Run(runs[k], &info);
    auto want = whole_session->Run(runs[k]);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->size(), 3u);
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].name, (*want)[i].name);
      EXPECT_EQ((*got)[i].value.dtype, (*want)[i].value.dtype);
      EXPECT_EQ((*got)[i].value.shape, (*want)[i].value.shape);
      EXPECT_EQ((*got)[i].value.bytes, (*want)[i].value.bytes);
    }
    EXPECT_TRUE(info.replayed);
    // A new input plans the tail; the latest one again finds its tail plan.
    EXPECT_EQ(info.planned, k != 2);
  }
  EXPECT_EQ(testing::Int64s((*cut_session->Run(runs[1]))[0].value),
            (std::vector<int64_t>{0, 1, 1, 0, 1, 39}));
  int prefix = 0, tail = 0;
  for (const StreamInstanceInfo& instance : cut_session->ListInstances()) {
    if (instance.part == "prefix") {
      ++prefix;
      EXPECT_EQ(instance.shape_signature, "x:[2,40];y:[3]");
      EXPECT_EQ(instance.state, "captured");
      EXPECT_EQ(instance.replays, runs.size() + 1);
      EXPECT_TRUE(cut_session->DumpInstance(instance.shape_signature, false).ok());
    } else {
      EXPECT_EQ(instance.part, "tail");
      ++tail;
    }
  }
  EXPECT_EQ(prefix, 1);
  EXPECT_EQ(tail, 1);  // the tail keeps its latest plan alone (its key holds the input's bytes)
  const StreamSessionCounters counters = cut_session->counters();
  EXPECT_EQ(counters.replays, 2 * (runs.size() + 1));  // every run replays both parts
  EXPECT_EQ(counters.live_instances, 2u);
}

// An error of the caller's visitor ends the run: the outputs are not handed over again from the
// whole model.
TEST_F(ValueSplitTest, AVisitorErrorIsNotRetriedOnTheWholeModel) {
  std::shared_ptr<const Model> cut = Load(CutModel(), true);
  ASSERT_NE(cut, nullptr);
  auto session = NewSession(cut);
  ASSERT_NE(session, nullptr);
  const std::vector<NamedTensor> inputs = CutInputs({3}, 1);
  auto validated = cut->Validate(inputs);
  ASSERT_TRUE(validated.ok()) << validated.status();
  int calls = 0;
  absl::Status status = session->Run(*validated, [&calls](size_t index, const PlanTensor&) {
    ++calls;
    return index == 1 ? absl::DataLossError("the client went away") : absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 2);
  auto again = session->Run(inputs);  // the cut still serves
  ASSERT_TRUE(again.ok()) << again.status();
  for (const StreamInstanceInfo& instance : session->ListInstances()) {
    EXPECT_NE(instance.part, "");
  }
}

// A model whose first node is value-dependent has nothing to replay: it is not cut.
TEST_F(ValueSplitTest, AValueDependentFirstNodeLeavesTheModelWhole) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {2, 40}).Output("z", {2, -1}, onnx::TensorProto::INT64);
  b.Node("NonZero", {"x"}, {"z"});
  b.Node("Relu", {"x"}, {"unused"});
  std::shared_ptr<const Model> model = Load(b, true);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->keyed_by_all_values());
  EXPECT_EQ(model->value_split(), nullptr);
}

// A prefix that cannot be planned from shapes (Range up to the largest of 100 input values,
// which no plan of shapes knows): the session runs the whole model, planned per input, from the
// first run on.
TEST_F(ValueSplitTest, APrefixThatCannotBePlannedFromShapesRunsTheWholeModel) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {100});
  b.Output("z", {1, -1}, onnx::TensorProto::INT64);
  b.FloatInit("zero", {}, {0.0f}).FloatInit("one", {}, {1.0f});
  testing::SetIntAttr(&b.Node("ReduceMax", {"x"}, {"m"}), "keepdims", 0);
  b.Node("Range", {"zero", "m", "one"}, {"r"});
  b.Node("NonZero", {"r"}, {"z"});
  std::shared_ptr<const Model> model = Load(b, true);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->value_split(), nullptr);
  auto session = NewSession(model);
  ASSERT_NE(session, nullptr);
  for (float top : {5.0f, 3.0f}) {
    std::vector<float> x(100, 0.0f);
    x[17] = top;
    auto got = session->Run({{"x", FloatTensor({100}, x)}});
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<int64_t> want;
    for (int64_t i = 1; i < static_cast<int64_t>(top); ++i) want.push_back(i);
    EXPECT_EQ(testing::Int64s((*got)[0].value), want);
  }
  const std::vector<StreamInstanceInfo> instances = session->ListInstances();
  EXPECT_EQ(instances.size(), 2u);
  for (const StreamInstanceInfo& instance : instances) EXPECT_EQ(instance.part, "");
}

}  // namespace
}  // namespace reprise::runtime::engine
