// StreamSession's plan cache and input checks (the tests of the former eager Session): one plan
// per input shape, errors that name the input, concurrent sessions of one model, and plans keyed
// by the values of a shape input.
#include <cstring>
#include <thread>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

// The CPU device with its kernels; models load with its registry (or one of their own: the CPU
// stream runs any CPU kernel).
class StreamSessionCacheTest : public runtime::testing::CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();  // the CPU device with its kernels
    if (HasFatalFailure()) return;
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 2}).Input("s", onnx::TensorProto::FLOAT, {1});
    b.Output("y", {-1, 2});
    b.Node("Mul", {"x", "s"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::unique_ptr<StreamSession> NewSession(std::shared_ptr<const Model> model,
                                            ExecMode mode = ExecMode::kReplay) {
    auto session = StreamSession::Create(std::move(model), device_, mode);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  std::shared_ptr<const Model> model_;
};

TEST_F(StreamSessionCacheTest, CachesOnePlanPerShape) {
  for (ExecMode mode : {ExecMode::kReplay, ExecMode::kEager}) {
    std::unique_ptr<StreamSession> session = NewSession(model_, mode);
    ASSERT_NE(session, nullptr);
    for (auto [n, planned] :
         {std::pair<int64_t, bool>{1, true}, {2, true}, {1, false}, {2, false}, {3, true}}) {
      std::vector<float> xs(static_cast<size_t>(2 * n), 1.5f);
      StreamRunInfo info;
      auto out =
          session->Run({{"x", FloatTensor({n, 2}, xs)}, {"s", FloatTensor({1}, {2})}}, &info);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].value.shape, (Shape{n, 2}));
      EXPECT_EQ(Floats((*out)[0].value), std::vector<float>(xs.size(), 3.0f));
      EXPECT_EQ(info.planned, planned) << n;
    }
    EXPECT_EQ(session->ListInstances().size(), 3u);
    EXPECT_EQ(session->counters().live_instances, 3u);
  }
}

TEST_F(StreamSessionCacheTest, BadInputsNameTheInputTheExpectedAndTheGiven) {
  std::unique_ptr<StreamSession> session = NewSession(model_);
  ASSERT_NE(session, nullptr);
  const TensorValue x = FloatTensor({1, 2}, {1, 2});
  const TensorValue s = FloatTensor({1}, {2});

  auto out = session->Run({{"x", x}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("missing input(s): \"s\" (float32 [1])"));

  out = session->Run({{"x", x}, {"s", s}, {"extra", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("unknown input(s) \"extra\""));

  TensorValue int_x{DataType::kInt64, {1, 2}, ValueBytes(16, 0)};
  out = session->Run({{"x", int_x}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("input \"x\" has element type int64, expected float32"));

  out = session->Run({{"x", FloatTensor({2, 3}, std::vector<float>(6))}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has shape [2,3], expected [N,2]"));

  out = session->Run({{"x", FloatTensor({2}, {1, 2})}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has shape [2], expected [N,2]"));

  TensorValue short_x = x;
  short_x.bytes = ValueBytes(x.bytes.begin(), x.bytes.begin() + 4);
  out = session->Run({{"x", short_x}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has 4 bytes"));

  out = session->Run({{"x", x}, {"x", x}, {"s", s}});
  EXPECT_FALSE(out.ok());
  // Nothing was planned for any of them.
  EXPECT_TRUE(session->ListInstances().empty());
  EXPECT_EQ(session->counters().live_instances, 0u);
}

// The server's way of running one model concurrently: a session (and stream) per thread over
// one model and device. Two threads per shape; each caller gets its own result.
TEST_F(StreamSessionCacheTest, ConcurrentSessionsGiveEachCallerItsOwnResult) {
  std::vector<std::unique_ptr<StreamSession>> sessions;
  for (int t = 0; t < 4; ++t) {
    sessions.push_back(NewSession(model_));
    ASSERT_NE(sessions.back(), nullptr);
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const int64_t n = 1 + t % 2;
      for (int i = 0; i < 50; ++i) {
        const float scale = static_cast<float>(t * 100 + i);
        std::vector<float> xs(static_cast<size_t>(2 * n), 1.0f);
        auto out = sessions[static_cast<size_t>(t)]->Run(
            {{"x", FloatTensor({n, 2}, xs)}, {"s", FloatTensor({1}, {scale})}});
        if (!out.ok() || Floats((*out)[0].value) != std::vector<float>(xs.size(), scale)) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
  for (const auto& session : sessions) {
    // One shape per session, captured once and replayed for every later run.
    ASSERT_EQ(session->ListInstances().size(), 1u);
    EXPECT_EQ(session->ListInstances()[0].state, "captured");
    EXPECT_EQ(session->counters().replays, 50u);
  }
}

TEST_F(StreamSessionCacheTest, ShapeGivenAsAnInputKeysPlansByValue) {
  KernelRegistry registry;
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry).ok());
  testing::RegisterFakeShapeKernels(&registry);
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {6}).Input("shape", onnx::TensorProto::INT64, {2});
  b.Output("y", {-1, -1});
  b.Node("Reshape", {"x", "shape"}, {"y"});
  auto model = Model::LoadBytes(b.Bytes(), registry);
  ASSERT_TRUE(model.ok()) << model.status();
  // From shapes alone the Reshape cannot be prepared.
  EXPECT_FALSE((*model)->Plan({{6}, {2}}).ok());

  auto shape_tensor = [](int64_t a, int64_t c) {
    TensorValue t{DataType::kInt64, {2}, ValueBytes(16, 0)};
    std::memcpy(t.bytes.data(), &a, 8);
    std::memcpy(t.bytes.data() + 8, &c, 8);
    return t;
  };
  std::unique_ptr<StreamSession> session = NewSession(*model);
  ASSERT_NE(session, nullptr);
  const TensorValue x = FloatTensor({6}, {1, 2, 3, 4, 5, 6});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2, 3}, {3, 2}, {2, 3}, {6, 1}}) {
    auto out = session->Run({{"x", x}, {"shape", shape_tensor(rows, cols)}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{rows, cols}));
    EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // Keyed by value: one plan per distinct value, each signature showing it.
  EXPECT_EQ(session->counters().value_plans, 3u);
  std::vector<StreamInstanceInfo> instances = session->ListInstances();
  ASSERT_EQ(instances.size(), 3u);
  for (const StreamInstanceInfo& instance : instances) {
    EXPECT_THAT(instance.shape_signature, HasSubstr("shape:[2]=("));
  }

  // A value-keyed plan refuses another value.
  bool keyed = false;
  TensorValue s23 = shape_tensor(2, 3), s32 = shape_tensor(3, 2);
  auto plan = (*model)->PlanForInputs({&x, &s23}, &keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(keyed);
  auto out = (*plan)->Run({&x, &s32});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"shape\" differs"));
}

}  // namespace
}  // namespace reprise::runtime::engine
