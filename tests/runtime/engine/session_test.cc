#include "runtime/engine/session.h"

#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok());
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, 2}).Input("s", onnx::TensorProto::FLOAT, {1});
    b.Output("y", {-1, 2});
    b.Node("Mul", {"x", "s"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), registry_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }
  KernelRegistry registry_;
  std::shared_ptr<const Model> model_;
};

TEST_F(SessionTest, CachesOnePlanPerShape) {
  Session session(model_);
  for (int64_t n : {1, 2, 1, 2, 3}) {
    std::vector<float> xs(static_cast<size_t>(2 * n), 1.5f);
    auto out = session.Run({{"x", FloatTensor({n, 2}, xs)}, {"s", FloatTensor({1}, {2})}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{n, 2}));
    EXPECT_EQ(Floats((*out)[0].value), std::vector<float>(xs.size(), 3.0f));
  }
  EXPECT_EQ(session.cached_plans(), 3u);
}

TEST_F(SessionTest, BadInputsNameTheInputTheExpectedAndTheGiven) {
  Session session(model_);
  const TensorValue x = FloatTensor({1, 2}, {1, 2});
  const TensorValue s = FloatTensor({1}, {2});

  auto out = session.Run({{"x", x}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("missing input(s): \"s\" (float32 [1])"));

  out = session.Run({{"x", x}, {"s", s}, {"extra", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("unknown input(s) \"extra\""));

  TensorValue int_x{DataType::kInt64, {1, 2}, std::vector<uint8_t>(16)};
  out = session.Run({{"x", int_x}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("input \"x\" has element type int64, expected float32"));

  out = session.Run({{"x", FloatTensor({2, 3}, std::vector<float>(6))}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has shape [2,3], expected [N,2]"));

  out = session.Run({{"x", FloatTensor({2}, {1, 2})}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has shape [2], expected [N,2]"));

  TensorValue short_x = x;
  short_x.bytes.resize(4);
  out = session.Run({{"x", short_x}, {"s", s}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("input \"x\" has 4 bytes"));

  out = session.Run({{"x", x}, {"x", x}, {"s", s}});
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(session.cached_plans(), 0u);
}

TEST_F(SessionTest, ConcurrentRunsGiveEachCallerItsOwnResult) {
  Session session(model_);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const int64_t n = 1 + t % 2;  // two threads per shape share a plan
      for (int i = 0; i < 50; ++i) {
        const float scale = static_cast<float>(t * 100 + i);
        std::vector<float> xs(static_cast<size_t>(2 * n), 1.0f);
        auto out = session.Run({{"x", FloatTensor({n, 2}, xs)}, {"s", FloatTensor({1}, {scale})}});
        if (!out.ok() || Floats((*out)[0].value) != std::vector<float>(xs.size(), scale)) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
  EXPECT_EQ(session.cached_plans(), 2u);
}

TEST(SessionValueKeyTest, ShapeGivenAsAnInputKeysPlansByValue) {
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
    TensorValue t{DataType::kInt64, {2}, std::vector<uint8_t>(16)};
    std::memcpy(t.bytes.data(), &a, 8);
    std::memcpy(t.bytes.data() + 8, &c, 8);
    return t;
  };
  Session session(*model);
  const TensorValue x = FloatTensor({6}, {1, 2, 3, 4, 5, 6});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2, 3}, {3, 2}, {2, 3}, {6, 1}}) {
    auto out = session.Run({{"x", x}, {"shape", shape_tensor(rows, cols)}});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{rows, cols}));
    EXPECT_EQ(Floats((*out)[0].value), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  EXPECT_TRUE(session.value_keyed());
  EXPECT_EQ(session.cached_plans(), 3u);  // one per distinct value

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
