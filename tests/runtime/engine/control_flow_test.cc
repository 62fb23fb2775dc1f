// If and Loop: subgraphs that read outer values, eager runs and replays whose instances hold
// IF / WHILE conditional tasks, scan outputs, plans per value where shapes follow values, and
// the guards (iterations, nesting).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/device.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::Int64s;
using testing::ModelBuilder;

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

void SetGraph(onnx::NodeProto* node, const std::string& name, const ModelBuilder& graph) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::GRAPH);
  *attr->mutable_g() = const_cast<ModelBuilder&>(graph).proto().graph();
}

TensorValue Int64Scalar(int64_t v) {
  TensorValue t{DataType::kInt64, {}, ValueBytes(8, 0)};
  std::memcpy(t.bytes.data(), &v, 8);
  return t;
}

TensorValue BoolScalar(bool v) { return TensorValue{DataType::kBool, {}, {uint8_t{v}}}; }

// A Loop body: (i int64, c bool, carried...) -> (c, carried..., scans...).
ModelBuilder Body(const std::vector<std::pair<std::string, std::vector<int64_t>>>& carried) {
  ModelBuilder body;
  body.Input("i", kInt64, {}).Input("c_in", kBool, {});
  for (const auto& [name, dims] : carried) body.Input(name, kFloat, dims);
  return body;
}

class ControlFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend("cpu");
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
    auto device = backend_->device(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
    if (!device_->kernels()->Has("Add")) {
      ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(device_->kernels()).ok());
    }
  }

  std::shared_ptr<const Model> Load(const ModelBuilder& b) {
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  std::unique_ptr<StreamSession> Session(std::shared_ptr<const Model> model, ExecMode mode) {
    auto session = StreamSession::Create(std::move(model), device_, mode);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  // The model of `b` and a session of it in each mode, eager first; empty (with the failure
  // reported) when either cannot be made.
  std::vector<std::pair<ExecMode, std::unique_ptr<StreamSession>>> EagerAndReplay(
      const ModelBuilder& b) {
    std::vector<std::pair<ExecMode, std::unique_ptr<StreamSession>>> sessions;
    std::shared_ptr<const Model> model = Load(b);
    if (model == nullptr) return sessions;
    for (ExecMode mode : {ExecMode::kEager, ExecMode::kReplay}) {
      std::unique_ptr<StreamSession> session = Session(model, mode);
      if (session == nullptr) return {};
      sessions.emplace_back(mode, std::move(session));
    }
    return sessions;
  }

  // The instances' dumps, joined.
  static std::string Dumps(const StreamSession& session) {
    std::string all;
    for (const StreamInstanceInfo& info : session.ListInstances()) {
      auto dump = session.DumpInstance(info.shape_signature, false);
      EXPECT_TRUE(dump.ok()) << dump.status();
      if (dump.ok()) all += *dump;
    }
    return all;
  }

  // y = If(sum(x) > 0) then x * 2 else x - 1; both branches read x and a constant of the
  // outer graph.
  ModelBuilder SignIf() {
    ModelBuilder then_b, else_b;
    then_b.Output("y_then", {-1, 4});
    then_b.Node("Mul", {"x", "two"}, {"y_then"});
    else_b.Output("y_else", {-1, 4});
    else_b.Node("Sub", {"x", "one"}, {"y_else"});
    ModelBuilder b;
    b.Input("x", kFloat, {-1, 4}).Output("y", {-1, 4});
    b.FloatInit("two", {}, {2.0f}).FloatInit("one", {}, {1.0f}).FloatInit("zero", {}, {0.0f});
    auto& sum = b.Node("ReduceSum", {"x"}, {"s"});
    testing::SetIntAttr(&sum, "keepdims", 0);
    b.Node("Greater", {"s", "zero"}, {"c"});
    auto& node = b.Node("If", {"c"}, {"y"}, "sign_if");
    SetGraph(&node, "then_branch", then_b);
    SetGraph(&node, "else_branch", else_b);
    return b;
  }

  std::unique_ptr<Backend> backend_;
  Device* device_ = nullptr;
};

TEST_F(ControlFlowTest, IfReplaysEitherBranchFromOneInstance) {
  auto model = Load(SignIf());
  ASSERT_NE(model, nullptr);
  auto replay = Session(model, ExecMode::kReplay);
  auto eager = Session(model, ExecMode::kEager);
  ASSERT_NE(replay, nullptr);
  ASSERT_NE(eager, nullptr);
  const std::vector<float> pos = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> neg = {-1, -2, 3, -4, 5, -6, -7, 0};
  const std::vector<float> doubled = {2, 4, 6, 8, 10, 12, 14, 16};
  const std::vector<float> minus_one = {-2, -3, 2, -5, 4, -7, -8, -1};
  for (int round = 0; round < 2; ++round) {
    for (const auto& [x, want] : {std::pair{pos, doubled}, std::pair{neg, minus_one}}) {
      for (StreamSession* session : {replay.get(), eager.get()}) {
        StreamRunInfo info;
        auto out = session->Run({{"x", FloatTensor({2, 4}, x)}}, &info);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ(Floats((*out)[0].value), want);
        if (session == replay.get()) {
          EXPECT_TRUE(info.replayed);
          // One capture serves both branches: the condition is read at every replay.
          EXPECT_EQ(info.captured, round == 0 && x == pos);
        }
      }
    }
  }
  ASSERT_EQ(replay->ListInstances().size(), 1u);
  EXPECT_EQ(replay->counters().value_plans, 0u);
  const std::string dump = Dumps(*replay);
  EXPECT_THAT(dump, HasSubstr("\"kind\": \"conditional\", \"type\": \"if\""));
  EXPECT_THAT(dump, HasSubstr("\"op\": \"Mul\""));  // then_branch's body
  EXPECT_THAT(dump, HasSubstr("\"op\": \"Sub\""));  // else_branch's body
}

TEST_F(ControlFlowTest, WhileLoopRunsUntilTheBodyClearsTheCondition) {
  // v = x; while max(v) < 100 (at most 1000 times): v = v * 2.
  ModelBuilder body = Body({{"v_in", {4}}});
  body.Output("c_out", {}, kBool).Output("v_out", {4});
  body.Node("Mul", {"v_in", "two"}, {"v_out"});
  auto& max = body.Node("ReduceMax", {"v_out"}, {"m"});
  testing::SetIntAttr(&max, "keepdims", 0);
  body.Node("Less", {"m", "hundred"}, {"c_out"});
  ModelBuilder b;
  b.Input("x", kFloat, {4}).Output("v", {4});
  b.Int64Init("trips", {}, {1000}).FloatInit("two", {}, {2.0f}).FloatInit("hundred", {}, {100.0f});
  auto& loop = b.Node("Loop", {"trips", "", "x"}, {"v"}, "doubling");
  SetGraph(&loop, "body", body);
  auto model = Load(b);
  ASSERT_NE(model, nullptr);
  auto replay = Session(model, ExecMode::kReplay);
  auto eager = Session(model, ExecMode::kEager);
  ASSERT_NE(replay, nullptr);
  ASSERT_NE(eager, nullptr);
  for (const std::vector<float>& x :
       {std::vector<float>{1, 2, 3, 0.5f}, {40, 1, 1, 1}, {0.25f, 0, 0, 0}, {200, 0, 0, 0}}) {
    std::vector<float> want = x;
    do {  // the body runs at least once (the condition starts true)
      for (float& v : want) v *= 2;
    } while (*std::max_element(want.begin(), want.end()) < 100);
    for (StreamSession* session : {replay.get(), eager.get()}) {
      auto out = session->Run({{"x", FloatTensor({4}, x)}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Floats((*out)[0].value), want);
    }
  }
  EXPECT_EQ(replay->counters().captures, 1u);
  EXPECT_THAT(Dumps(*replay), HasSubstr("\"type\": \"while\""));
}

TEST_F(ControlFlowTest, ScanOutputsOfAConstantTripCount) {
  // s = s0; 5 times: s = s + x (an outer value); the scan output stacks every s.
  ModelBuilder body = Body({{"s_in", {2}}});
  body.Output("c_out", {}, kBool).Output("s_out", {2}).Output("scan", {2});
  body.Node("Identity", {"c_in"}, {"c_out"});
  body.Node("Add", {"s_in", "x"}, {"s_out"});
  body.Node("Identity", {"s_out"}, {"scan"});
  ModelBuilder b;
  b.Input("x", kFloat, {2}).Input("s0", kFloat, {2}).Output("s", {2}).Output("scans", {-1, 2});
  b.Int64Init("trips", {}, {5});
  auto& loop = b.Node("Loop", {"trips", "", "s0"}, {"s", "scans"}, "accumulate");
  SetGraph(&loop, "body", body);
  auto sessions = EagerAndReplay(b);
  ASSERT_EQ(sessions.size(), 2u);
  for (auto& [mode, session] : sessions) {
    for (float start : {10.0f, -3.0f}) {
      auto out = session->Run(
          {{"x", FloatTensor({2}, {1, 2})}, {"s0", FloatTensor({2}, {start, 2 * start})}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{start + 5, 2 * start + 10}));
      EXPECT_EQ((*out)[1].value.shape, (Shape{5, 2}));
      std::vector<float> want;
      for (int i = 1; i <= 5; ++i) {
        want.push_back(start + static_cast<float>(i));
        want.push_back(2 * start + 2 * static_cast<float>(i));
      }
      EXPECT_EQ(Floats((*out)[1].value), want);
    }
  }
}

// A subgraph's declared input shapes are hints: two loop-carried values declared with the same
// symbolic dim (as exporters write them) may differ there. A model's own inputs must agree.
TEST_F(ControlFlowTest, LoopCarriedValuesMayShareASymbolThatTheirShapesDoNot) {
  ModelBuilder body = Body({{"a_in", {-1, 3}}, {"b_in", {-1, 2}}});  // both [N, _]
  body.Output("c_out", {}, kBool).Output("a_out", {-1, 3}).Output("b_out", {-1, 2});
  body.Node("Identity", {"c_in"}, {"c_out"});
  body.Node("Add", {"a_in", "one"}, {"a_out"});
  body.Node("Identity", {"b_in"}, {"b_out"});
  ModelBuilder b;
  b.Input("a", kFloat, {-1, 3}, "A").Input("b", kFloat, {-1, 2}, "B");
  b.Output("a_last", {-1, 3}).Output("b_last", {-1, 2});
  b.Int64Init("trips", {}, {3}).FloatInit("one", {}, {1.0f});
  auto& loop = b.Node("Loop", {"trips", "", "a", "b"}, {"a_last", "b_last"}, "carry");
  SetGraph(&loop, "body", body);
  auto sessions = EagerAndReplay(b);
  ASSERT_EQ(sessions.size(), 2u);
  for (auto& [mode, session] : sessions) {
    auto out = session->Run(
        {{"a", FloatTensor({1, 3}, {1, 2, 3})}, {"b", FloatTensor({2, 2}, {5, 6, 7, 8})}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{4, 5, 6}));
    EXPECT_EQ((*out)[1].value.shape, (Shape{2, 2}));
    EXPECT_EQ(Floats((*out)[1].value), (std::vector<float>{5, 6, 7, 8}));
  }
  // The same symbol on two inputs of the model itself is still one size.
  ModelBuilder same;
  same.Input("a", kFloat, {-1, 3}).Input("b", kFloat, {-1, 3}).Output("y", {-1, 3});
  same.Node("Add", {"a", "b"}, {"y"});
  auto strict = Load(same);
  ASSERT_NE(strict, nullptr);
  auto session = Session(strict, ExecMode::kEager);
  ASSERT_NE(session, nullptr);
  auto out = session->Run(
      {{"a", FloatTensor({1, 3}, {1, 2, 3})}, {"b", FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("as in an earlier input"));
}

// A carried value that grows cannot be planned once for every iteration. Where all the loop's
// inputs are known when planning (a plan for the input values), the loop is computed there
// iteration by iteration, each body planned for its own shapes.
TEST_F(ControlFlowTest, ALoopOfKnownInputsWhoseValueGrowsIsComputedWhenPlanning) {
  // An empty carried value (e) is known too.
  ModelBuilder body = Body({{"v_in", {-1}}, {"e_in", {-1}}});
  body.Output("c_out", {}, kBool).Output("v_out", {-1}).Output("e_out", {-1}).Output("sum", {1});
  body.Node("Identity", {"c_in"}, {"c_out"});
  testing::SetIntAttr(&body.Node("Concat", {"v_in", "v_in"}, {"v_out"}), "axis", 0);
  body.Node("Identity", {"e_in"}, {"e_out"});
  body.Node("ReduceSum", {"v_out"}, {"sum"});
  ModelBuilder b;
  b.Input("x", kFloat, {2}).Input("e", kFloat, {0});
  b.Output("v", {-1}).Output("e_last", {-1}).Output("sums", {-1, 1});
  b.Int64Init("trips", {}, {3});
  auto& loop = b.Node("Loop", {"trips", "", "x", "e"}, {"v", "e_last", "sums"}, "doubling");
  SetGraph(&loop, "body", body);
  auto sessions = EagerAndReplay(b);
  ASSERT_EQ(sessions.size(), 2u);
  for (auto& [mode, session] : sessions) {
    for (float a : {1.0f, -2.0f}) {
      StreamRunInfo info;
      auto out =
          session->Run({{"x", FloatTensor({2}, {a, 3})}, {"e", FloatTensor({0}, {})}}, &info);
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<float> want;
      for (int i = 0; i < 8; ++i) {
        want.push_back(a);
        want.push_back(3);
      }
      EXPECT_EQ(Floats((*out)[0].value), want);
      EXPECT_EQ((*out)[1].value.shape, (Shape{0}));
      EXPECT_EQ((*out)[2].value.shape, (Shape{3, 1}));
      EXPECT_EQ(Floats((*out)[2].value),
                (std::vector<float>{2 * (a + 3), 4 * (a + 3), 8 * (a + 3)}));
      EXPECT_TRUE(info.planned);  // each input value its own plan
    }
  }
  // A carried value known only at run time (100 elements: no plan per value) still cannot grow.
  ModelBuilder wide = Body({{"v_in", {-1, 100}}});
  wide.Output("c_out", {}, kBool).Output("v_out", {-1, 100});
  wide.Node("Identity", {"c_in"}, {"c_out"});
  testing::SetIntAttr(&wide.Node("Concat", {"v_in", "v_in"}, {"v_out"}), "axis", 0);
  ModelBuilder runtime_only;
  runtime_only.Input("x", kFloat, {-1, 100}).Output("v", {-1, 100});
  runtime_only.Int64Init("trips", {}, {3});
  SetGraph(&runtime_only.Node("Loop", {"trips", "", "x"}, {"v"}, "doubling"), "body", wide);
  auto big = Load(runtime_only);
  ASSERT_NE(big, nullptr);
  auto session = Session(big, ExecMode::kEager);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({{"x", FloatTensor({1, 100}, std::vector<float>(100, 1.0f))}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("node \"doubling\" (Loop)"));
  // Not computed when planning (x is not known then): the one-plan error alone.
  EXPECT_THAT(out.status().message(), ::testing::Not(HasSubstr("iteration by iteration")))
      << out.status();
}

// Computing a loop iteration by iteration when planning plans its body each time: a hostile
// trip count with a condition that never clears stops at max_unrolled_iterations for the whole
// plan (nested loops count together), not at the far larger max_loop_iterations.
TEST_F(ControlFlowTest, PlanningComputesBoundedLoopIterationsOneByOne) {
  // The carried value grows by one element each iteration (no plan for all of them).
  ModelBuilder body = Body({{"v_in", {-1}}});
  body.Output("c_out", {}, kBool).Output("v_out", {-1});
  body.Node("Identity", {"c_in"}, {"c_out"});
  body.FloatInit("one", {1}, {1.0f});
  testing::SetIntAttr(&body.Node("Concat", {"v_in", "one"}, {"v_out"}), "axis", 0);
  for (const int64_t trips : {int64_t{40}, int64_t{1} << 40}) {
    SCOPED_TRACE(trips);
    ModelBuilder b;
    b.Input("x", kFloat, {1}).Output("v", {-1});
    b.Int64Init("trips", {}, {trips});
    SetGraph(&b.Node("Loop", {"trips", "", "x"}, {"v"}, "growing"), "body", body);
    auto model = Load(b);
    ASSERT_NE(model, nullptr);
    const TensorValue x = FloatTensor({1}, {5});
    PlanOptions options;
    options.max_unrolled_iterations = 50;
    auto plan = ExecutionPlan::Create(model->graph(), *device_->kernels(), {{1}}, options, {&x});
    if (trips == 40) {
      ASSERT_TRUE(plan.ok()) << plan.status();
      auto out = (*plan)->Run({&x});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].value.shape, (Shape{41}));
      continue;
    }
    // The one-plan error, then why the loop was not computed when planning.
    ASSERT_FALSE(plan.ok());
    EXPECT_THAT(plan.status().message(), HasSubstr("50 loop iterations allowed one by one"));
  }
}

// How the body of AppendingLoop reads its list besides appending a row to it.
enum class ListReader { kNone, kShape, kSum };

// A loop computed when planning whose body appends a row to a list (Concat along axis 0). The
// body is given none of the list when nothing else reads it. kShape also reads the list's length
// (the row is scaled by it); kSum also reads the longer list (its sum, a scan output "sums").
ModelBuilder AppendingLoop(int64_t trips, int64_t width, ListReader reader) {
  ModelBuilder body = Body({{"list_in", {-1, width}}});
  body.Output("c_out", {}, kBool).Output("list_out", {-1, width});
  if (reader == ListReader::kSum) body.Output("sum", {});
  body.Node("Identity", {"c_in"}, {"c_out"});
  std::vector<float> ramp(static_cast<size_t>(width));
  for (int64_t j = 0; j < width; ++j) ramp[j] = static_cast<float>(j);
  body.FloatInit("ramp", {1, width}, ramp);
  testing::SetIntAttr(&body.Node("Cast", {"i"}, {"f"}), "to", 1);
  body.Node("Add", {"ramp", "f"}, {"row0"});
  if (reader == ListReader::kShape) {
    body.Int64Init("zero", {1}, {0});
    body.Node("Shape", {"list_in"}, {"dims"});
    testing::SetIntAttr(&body.Node("Gather", {"dims", "zero"}, {"len"}), "axis", 0);
    testing::SetIntAttr(&body.Node("Cast", {"len"}, {"flen"}), "to", 1);
    body.Node("Mul", {"row0", "flen"}, {"row"});
  } else {
    body.Node("Identity", {"row0"}, {"row"});
  }
  testing::SetIntAttr(&body.Node("Concat", {"list_in", "row"}, {"list_out"}), "axis", 0);
  if (reader == ListReader::kSum) {
    testing::SetIntAttr(&body.Node("ReduceSum", {"list_out"}, {"sum"}), "keepdims", 0);
  }
  ModelBuilder b;
  b.Input("x", kFloat, {1, width}).Output("list", {-1, width});
  std::vector<std::string> outputs = {"list"};
  if (reader == ListReader::kSum) {
    b.Output("sums", {-1});
    outputs.push_back("sums");
  }
  b.Int64Init("trips", {}, {trips});
  SetGraph(&b.Node("Loop", {"trips", "", "x"}, outputs, "appending"), "body", body);
  return b;
}

TEST_F(ControlFlowTest, ALoopAppendingToAListComputesItWhenPlanning) {
  const int64_t trips = 30, width = 5;
  for (const ListReader reader : {ListReader::kNone, ListReader::kShape, ListReader::kSum}) {
    SCOPED_TRACE(static_cast<int>(reader));
    auto model = Load(AppendingLoop(trips, width, reader));
    ASSERT_NE(model, nullptr);
    const TensorValue x = FloatTensor({1, width}, {-1, -2, -3, -4, -5});
    auto plan = ExecutionPlan::Create(model->graph(), *device_->kernels(), {{1, width}}, {}, {&x});
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto out = (*plan)->Run({&x});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want = {-1, -2, -3, -4, -5};
    std::vector<float> sums;
    float sum = -15;
    for (int64_t i = 0; i < trips; ++i) {
      for (int64_t j = 0; j < width; ++j) {
        want.push_back(static_cast<float>((j + i) * (reader == ListReader::kShape ? i + 1 : 1)));
        sum += want.back();
      }
      sums.push_back(sum);
    }
    EXPECT_EQ((*out)[0].value.shape, (Shape{trips + 1, width}));
    EXPECT_EQ(Floats((*out)[0].value), want);
    if (reader == ListReader::kSum) {
      EXPECT_EQ(Floats((*out)[1].value), sums);
    }
  }
}

TEST_F(ControlFlowTest, ScanOutputsOfATripCountInputArePlannedPerValue) {
  // The scan output's length is the trip count, an input: each value gets its own plan.
  ModelBuilder body = Body({});
  body.Output("c_out", {}, kBool).Output("scan", {}, kInt64);
  body.Node("Identity", {"c_in"}, {"c_out"});
  body.Node("Mul", {"i", "i"}, {"scan"});
  ModelBuilder b;
  b.Input("n", kInt64, {}).Output("squares", {-1}, kInt64);
  auto& loop = b.Node("Loop", {"n", ""}, {"squares"}, "squares");
  SetGraph(&loop, "body", body);
  auto model = Load(b);
  ASSERT_NE(model, nullptr);
  auto session = Session(model, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  for (int64_t n : {3, 5, 0, 3}) {
    auto out = session->Run({{"n", Int64Scalar(n)}});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<int64_t> want;
    for (int64_t i = 0; i < n; ++i) want.push_back(i * i);
    EXPECT_EQ(Int64s((*out)[0].value), want);
  }
  EXPECT_EQ(session->ListInstances().size(), 3u);  // n = 3, 5 and 0
}

TEST_F(ControlFlowTest, BranchesOfDifferentShapesArePlannedPerCondition) {
  // then: x ([2, 3]); else: the column sums ([1, 3]). The condition is an input.
  ModelBuilder then_b, else_b;
  then_b.Output("t", {-1, 3});
  then_b.Node("Identity", {"x"}, {"t"});
  else_b.Output("e", {-1, 3});
  auto& sum = else_b.Node("ReduceSum", {"x", "axes"}, {"e"});
  testing::SetIntAttr(&sum, "keepdims", 1);
  ModelBuilder b;
  b.Input("c", kBool, {}).Input("x", kFloat, {2, 3}).Output("y", {-1, 3});
  b.Int64Init("axes", {1}, {0});
  auto& node = b.Node("If", {"c"}, {"y"}, "shape_if");
  SetGraph(&node, "then_branch", then_b);
  SetGraph(&node, "else_branch", else_b);
  auto model = Load(b);
  ASSERT_NE(model, nullptr);
  auto session = Session(model, ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  const TensorValue x = FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  for (bool c : {true, false, true}) {
    auto out = session->Run({{"c", BoolScalar(c)}, {"x", x}});
    ASSERT_TRUE(out.ok()) << out.status();
    if (c) {
      EXPECT_EQ((*out)[0].value.shape, (Shape{2, 3}));
      EXPECT_EQ(Floats((*out)[0].value), Floats(x));
    } else {
      EXPECT_EQ((*out)[0].value.shape, (Shape{1, 3}));
      EXPECT_THAT(Floats((*out)[0].value), ElementsAre(5, 7, 9));
    }
  }
  // One plan per condition value, each shown with the value in its signature and counted.
  EXPECT_EQ(session->counters().value_plans, 2u);
  const auto instances = session->ListInstances();
  ASSERT_EQ(instances.size(), 2u);
  for (const StreamInstanceInfo& info : instances) {
    EXPECT_THAT(info.shape_signature, HasSubstr("c:[]="));
  }
}

TEST_F(ControlFlowTest, NestedIfInsideALoopRecordsNestedConditionals) {
  // acc = a; for i in 0..3: acc = (i % 2 == 0) ? acc + 1 : acc * 2.
  ModelBuilder then_b, else_b;
  then_b.Output("t", {2});
  then_b.Node("Add", {"acc_in", "one"}, {"t"});
  else_b.Output("e", {2});
  else_b.Node("Mul", {"acc_in", "two"}, {"e"});
  ModelBuilder body = Body({{"acc_in", {2}}});
  body.Output("c_out", {}, kBool).Output("acc_out", {2});
  body.Int64Init("two_i", {}, {2}).Int64Init("zero_i", {}, {0});
  body.Node("Identity", {"c_in"}, {"c_out"});
  auto& mod = body.Node("Mod", {"i", "two_i"}, {"r"});
  testing::SetIntAttr(&mod, "fmod", 0);
  body.Node("Equal", {"r", "zero_i"}, {"even"});
  auto& branch = body.Node("If", {"even"}, {"acc_out"}, "parity");
  SetGraph(&branch, "then_branch", then_b);
  SetGraph(&branch, "else_branch", else_b);
  ModelBuilder b;
  b.Input("a", kFloat, {2}).Output("acc", {2});
  b.Int64Init("trips", {}, {4}).FloatInit("one", {}, {1.0f}).FloatInit("two", {}, {2.0f});
  auto& loop = b.Node("Loop", {"trips", "", "a"}, {"acc"}, "steps");
  SetGraph(&loop, "body", body);
  auto sessions = EagerAndReplay(b);
  ASSERT_EQ(sessions.size(), 2u);
  for (auto& [mode, session] : sessions) {
    for (int run = 0; run < 2; ++run) {
      auto out = session->Run({{"a", FloatTensor({2}, {1, 2})}});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_THAT(Floats((*out)[0].value), ElementsAre(10, 14));
    }
    if (mode == ExecMode::kReplay) {
      const std::string dump = Dumps(*session);
      EXPECT_THAT(dump, HasSubstr("\"type\": \"while\""));
      EXPECT_THAT(dump, HasSubstr("\"type\": \"if\""));
    }
  }
}

TEST_F(ControlFlowTest, ALoopStopsAtTheIterationCap) {
  // A trip count from the client with a condition that never clears.
  ModelBuilder body = Body({{"v_in", {1}}});
  body.Output("c_out", {}, kBool).Output("v_out", {1});
  body.Node("Identity", {"c_in"}, {"c_out"});
  body.Node("Add", {"v_in", "one"}, {"v_out"});
  ModelBuilder b;
  b.Input("n", kInt64, {}).Input("x", kFloat, {1}).Output("v", {1});
  b.FloatInit("one", {}, {1.0f});
  auto& loop = b.Node("Loop", {"n", "", "x"}, {"v"}, "count");
  SetGraph(&loop, "body", body);
  auto model = Load(b);
  ASSERT_NE(model, nullptr);
  PlanOptions options;
  options.max_loop_iterations = 100;
  auto plan = ExecutionPlan::Create(model->graph(), *device_->kernels(), {{}, {1}}, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const TensorValue x = FloatTensor({1}, {0});
  const TensorValue n_ok = Int64Scalar(100);
  auto out = (*plan)->Run({&n_ok, &x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Floats((*out)[0].value), ElementsAre(100));
  const TensorValue n_huge = Int64Scalar(int64_t{1} << 62);
  out = (*plan)->Run({&n_huge, &x});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("node \"count\" (Loop)"));
}

TEST_F(ControlFlowTest, SubgraphsNestedTooDeepAreRefusedAtLoad) {
  // If inside If inside ... (20 levels in the then branches).
  ModelBuilder leaf;
  leaf.Output("leaf", {1});
  leaf.Node("Identity", {"x"}, {"leaf"});
  ModelBuilder inner = leaf;
  for (int level = 1; level <= 20; ++level) {
    ModelBuilder outer;
    const std::string out = absl::StrCat("y", level);
    outer.Output(out, {1});
    auto& node = outer.Node("If", {"c"}, {out});
    SetGraph(&node, "then_branch", inner);
    SetGraph(&node, "else_branch", leaf);
    inner = std::move(outer);
  }
  ModelBuilder b;
  b.Input("c", kBool, {}).Input("x", kFloat, {1}).Output("y", {1});
  auto& node = b.Node("If", {"c"}, {"y"});
  SetGraph(&node, "then_branch", inner);
  SetGraph(&node, "else_branch", leaf);
  auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("nest more than"));
}

}  // namespace
}  // namespace reprise::runtime::engine
