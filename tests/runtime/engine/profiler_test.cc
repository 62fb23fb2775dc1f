// The profiler (profiler.h, profile_report.h): one span per plan step per run, named as the plan
// names its steps and nested in its run, on the stream's row; a trace that loads as Chrome-trace
// JSON; the table. No timing is asserted beyond the order of a span's ends.
#include "runtime/engine/profiler.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/json_text.h"
#include "runtime/engine/profile_report.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

// The CPU device with its kernels (CoreTest) and a four-step model.
class ProfilerTest : public runtime::testing::CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    // y = -((x * s + x) - s), the Neg node unnamed.
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Input("s", onnx::TensorProto::FLOAT, {1});
    b.Output("y", {-1, 4});
    b.Node("Mul", {"x", "s"}, {"t"}, "scale");
    b.Node("Add", {"t", "x"}, {"u"}, "residual");
    b.Node("Sub", {"u", "s"}, {"v"}, "shift");
    b.Node("Neg", {"v"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    inputs_ = {{"x", FloatTensor({2, 4}, std::vector<float>(8, 1.0f))},
               {"s", FloatTensor({1}, {2.0f})}};
  }

  Profile MustProfile(bool replay, int iterations) {
    ProfileOptions options;
    options.iterations = iterations;
    options.warmup = 1;
    options.replay = replay;
    auto profile = ProfileModel(*model_, device_, inputs_, options, "test model");
    EXPECT_TRUE(profile.ok()) << profile.status();
    return profile.ok() ? *std::move(profile) : Profile{};
  }

  // The plan's step names as the profile should give them.
  std::vector<std::string> PlanStepNames() {
    auto ordered = model_->MatchInputs(inputs_);
    EXPECT_TRUE(ordered.ok()) << ordered.status();
    bool keyed = false;
    auto plan = model_->PlanForInputs(*ordered, &keyed);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<std::string> names;
    for (size_t i = 0; i < (*plan)->steps().size(); ++i) {
      const PlanStep& step = (*plan)->steps()[i];
      names.push_back(step.node_name.empty() ? absl::StrCat(step.op, "#", i) : step.node_name);
    }
    return names;
  }

  // Every run has exactly one step span per plan step, in plan order, inside the run's span.
  void ExpectOneSpanPerStepPerRun(const Profile& profile, int runs) {
    ASSERT_EQ(profile.runs, runs);
    for (int r = 0; r < runs; ++r) {
      const ProfileSpan* run = nullptr;
      std::vector<const ProfileSpan*> steps;
      for (const ProfileSpan& span : profile.spans) {
        if (span.run != r) continue;
        if (span.kind == SpanKind::kRun) {
          EXPECT_EQ(run, nullptr) << "two spans for run " << r;
          run = &span;
        } else {
          EXPECT_EQ(span.kind, SpanKind::kStep) << span.name;
          steps.push_back(&span);
        }
      }
      ASSERT_NE(run, nullptr) << "no span for run " << r;
      EXPECT_EQ(run->row, 0);
      ASSERT_EQ(steps.size(), profile.steps.size()) << "run " << r;
      for (size_t i = 0; i < steps.size(); ++i) {
        EXPECT_EQ(steps[i]->step, static_cast<int>(i));
        EXPECT_EQ(steps[i]->name, profile.steps[i].name);
        EXPECT_GE(steps[i]->row, 1);
        EXPECT_GE(steps[i]->dur_ns, 0);
        EXPECT_GE(steps[i]->start_ns, run->start_ns) << steps[i]->name << " in run " << r;
        EXPECT_LE(steps[i]->start_ns + steps[i]->dur_ns, run->start_ns + run->dur_ns)
            << steps[i]->name << " in run " << r;
        if (i > 0) {
          EXPECT_GE(steps[i]->start_ns, steps[i - 1]->start_ns + steps[i - 1]->dur_ns);
        }
      }
    }
  }

  std::shared_ptr<const Model> model_;
  std::vector<NamedTensor> inputs_;
};

TEST_F(ProfilerTest, ReplayHasOneSpanPerStepPerRunOnTheStreamRow) {
  const Profile profile = MustProfile(/*replay=*/true, 3);
  EXPECT_EQ(profile.mode, "replay");
  EXPECT_EQ(profile.note, "");
  std::vector<std::string> names;
  std::vector<std::string> kernels;
  for (const ProfileStep& step : profile.steps) {
    names.push_back(step.name);
    kernels.push_back(step.kernel);
  }
  EXPECT_EQ(names, PlanStepNames());
  // The importer names the unnamed node.
  EXPECT_THAT(names, ::testing::ElementsAre("scale", "residual", "shift", HasSubstr("Neg")));
  EXPECT_THAT(kernels, ::testing::ElementsAre("Mul", "Add", "Sub", "Neg"));
  ExpectOneSpanPerStepPerRun(profile, 3);
  ASSERT_EQ(profile.rows.size(), 2u);
  EXPECT_EQ(profile.rows[0], "host: runs");
  EXPECT_EQ(profile.rows[1], "stream 0");
}

TEST_F(ProfilerTest, EagerTimesTheStepLoop) {
  const Profile profile = MustProfile(/*replay=*/false, 2);
  EXPECT_EQ(profile.mode, "eager");
  ExpectOneSpanPerStepPerRun(profile, 2);
  ASSERT_EQ(profile.rows.size(), 2u);
  EXPECT_THAT(profile.rows[1], HasSubstr("eager"));
}

TEST_F(ProfilerTest, TraceIsChromeTraceJsonWithTheSteps) {
  const Profile profile = MustProfile(/*replay=*/true, 2);
  // Loaded by Python's json: complete events with pid / tid / ts / dur, a thread name for every
  // row used, one event per step per run named "<node> (<kernel>)", nested in its run.
  runtime::testing::CheckJsonWithPython(
      ProfileTraceJson(profile),
      "ev=d[\"traceEvents\"]; xs=[e for e in ev if e[\"ph\"]==\"X\"]; "
      "names={e[\"tid\"]:e[\"args\"][\"name\"] for e in ev if e[\"name\"]==\"thread_name\"}; "
      "assert all(isinstance(e[k],(int,float)) for e in xs for k in (\"pid\",\"tid\",\"ts\","
      "\"dur\")); assert all(e[\"dur\"]>=0 for e in xs); "
      "assert set(e[\"tid\"] for e in xs) <= set(names); assert names[0]==\"host: runs\"; "
      "runs=[e for e in xs if e[\"cat\"]==\"run\"]; steps=[e for e in xs if e[\"cat\"]==\"step\"]; "
      "assert len(runs)==2 and len(steps)==8; "
      "assert [e[\"name\"] for e in steps[:3]]==[\"scale (Mul)\",\"residual (Add)\","
      "\"shift (Sub)\"] and steps[3][\"name\"].endswith(\" (Neg)\"); "
      "assert all(names[e[\"tid\"]]==\"stream 0\" for e in steps); "
      "r={e[\"args\"][\"run\"]:e for e in runs}; "
      "assert all(r[e[\"args\"][\"run\"]][\"ts\"]<=e[\"ts\"] and e[\"ts\"]+e[\"dur\"]<="
      "r[e[\"args\"][\"run\"]][\"ts\"]+r[e[\"args\"][\"run\"]][\"dur\"]+0.001 for e in steps); "
      "assert d[\"otherData\"][\"steps\"]==4");
}

// A step whose kernel has several ways (a convolution) names the one it runs, in the profile and
// in the trace's args; steps of one way (Mul, Add, ...) carry none.
TEST_F(ProfilerTest, TraceNamesTheImplementationOfEachStep) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, 4, 6, 6});
  b.Output("y", {1, 8, 6, 6});
  AddSameConv(b, "conv", "x", "y", 4, 8, 3, 5);
  auto conv = Model::LoadBytes(b.Bytes(), *device_->kernels());
  ASSERT_TRUE(conv.ok()) << conv.status();
  const std::vector<NamedTensor> inputs = {
      {"x", FloatTensor({1, 4, 6, 6}, std::vector<float>(144, 0.5f))}};
  ProfileOptions options;
  options.iterations = 1;
  auto profile = ProfileModel(**conv, device_, inputs, options, "conv model");
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_EQ(profile->steps.size(), 1u);
  const std::string implementation = profile->steps[0].implementation;
  EXPECT_FALSE(implementation.empty());
  runtime::testing::CheckJsonWithPython(
      ProfileTraceJson(*profile),
      "steps=[e for e in d[\"traceEvents\"] if e.get(\"cat\")==\"step\"]; "
      "assert len(steps)==1 and steps[0][\"args\"][\"implementation\"]==" +
          JsonQuote(implementation));
  const Profile plain = MustProfile(/*replay=*/true, 1);
  for (const ProfileStep& step : plain.steps) EXPECT_EQ(step.implementation, "") << step.name;
  runtime::testing::CheckJsonWithPython(
      ProfileTraceJson(plain),
      "assert not any(\"implementation\" in e.get(\"args\",{}) for e in d[\"traceEvents\"])");
}

TEST_F(ProfilerTest, TableNamesTheStepsTheOpsAndTheTimeOutsideKernels) {
  const std::string table = ProfileTable(MustProfile(/*replay=*/true, 2), /*top=*/2);
  EXPECT_THAT(table, HasSubstr("profile of test model: replay, 2 runs, 4 steps"));
  EXPECT_THAT(table, HasSubstr("top 2 steps by total time"));
  EXPECT_THAT(table, HasSubstr("time per op type"));
  for (const char* op : {"Mul", "Add", "Sub", "Neg"}) EXPECT_THAT(table, HasSubstr(op));
  EXPECT_THAT(table, HasSubstr("outside kernels"));
}

TEST_F(ProfilerTest, RefusesBadOptionsAndInputs) {
  ProfileOptions options;
  options.iterations = 0;
  auto profile = ProfileModel(*model_, device_, inputs_, options, "m");
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
  options.iterations = 1;
  std::vector<NamedTensor> wrong = {inputs_[0]};
  profile = ProfileModel(*model_, device_, wrong, options, "m");
  ASSERT_FALSE(profile.ok());
  EXPECT_THAT(profile.status().message(), HasSubstr("\"s\""));
}

TEST_F(ProfilerTest, MakeProfileInputsTakesUnknownDimsAsOne) {
  auto inputs = MakeProfileInputs(*model_);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 2u);
  EXPECT_EQ((*inputs)[0].name, "x");
  EXPECT_EQ((*inputs)[0].value.shape, (Shape{1, 4}));
  EXPECT_EQ((*inputs)[0].value.bytes.size(), 16u);
  EXPECT_EQ((*inputs)[1].value.shape, (Shape{1}));
  ProfileOptions options;
  options.iterations = 1;
  EXPECT_TRUE(ProfileModel(*model_, device_, *inputs, options, "m").ok());
}

}  // namespace
}  // namespace reprise::runtime::engine
