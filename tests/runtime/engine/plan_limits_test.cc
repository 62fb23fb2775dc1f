// limits.max_plan_bytes and allocation failures at the plan boundary (hostile-input issue).
#include <cstdint>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;

class PlanLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(&registry_).ok()); }

  // y = x + x, x of any shape [a, b].
  std::shared_ptr<const Model> AddModel(int64_t max_plan_bytes) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, -1}, /*symbol=*/"").Output("y", {-1, -1});
    b.Node("Add", {"x", "x"}, {"y"});
    ModelOptions options;
    options.max_plan_bytes = max_plan_bytes;
    auto model = Model::LoadBytes(b.Bytes(), registry_, options);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  // A replaying session of `model` on the CPU device (kept alive by the fixture).
  std::unique_ptr<StreamSession> Session(std::shared_ptr<const Model> model,
                                         StreamSessionOptions options) {
    absl::StatusOr<std::unique_ptr<runtime::Backend>> backend = runtime::CreateBackend("cpu");
    EXPECT_TRUE(backend.ok());
    if (!backend.ok()) return nullptr;
    backend_ = *std::move(backend);
    absl::StatusOr<Device*> device = backend_->device(0);
    EXPECT_TRUE(device.ok());
    if (!device.ok()) return nullptr;
    auto session = StreamSession::Create(std::move(model), *device, ExecMode::kReplay, options);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  KernelRegistry registry_;
  std::unique_ptr<runtime::Backend> backend_;
};

TEST_F(PlanLimitsTest, APlanOverTheCapIsRefusedNamingTheLimit) {
  std::shared_ptr<const Model> model = AddModel(1 << 20);
  ASSERT_NE(model, nullptr);
  // 64 KiB in, 64 KiB out: within 1 MiB.
  EXPECT_TRUE(model->Plan({{128, 128}}).ok());
  // 4 MiB in: over the cap before anything is allocated.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> big = model->Plan({{1024, 1024}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("limits.max_plan_bytes (1048576)"));
  // 600 KiB in fits, its 600 KiB output does not.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> half = model->Plan({{512, 300}});
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(half.status().message(), HasSubstr("limits.max_plan_bytes"));
  EXPECT_THAT(half.status().message(), HasSubstr("an output of float32 [512,300]"));
}

TEST_F(PlanLimitsTest, OverflowingShapesAreInvalid) {
  std::shared_ptr<const Model> model = AddModel(0);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      model->Plan({{int64_t{1} << 40, int64_t{1} << 40}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("overflows"));
}

TEST_F(PlanLimitsTest, AFailedAllocationIsAStatusNotAnAbort) {
  // No cap: 2^46 floats (256 TiB) pass every limit, and the allocation itself fails (more
  // than the address space; under ASan, over its largest allocation, with
  // allocator_may_return_null=1 as the asan test preset sets).
  std::shared_ptr<const Model> model = AddModel(0);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      model->Plan({{int64_t{1} << 23, int64_t{1} << 23}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(), HasSubstr("cannot allocate"));
  // The model still plans and runs a sane shape afterwards.
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> small = model->Plan({{2, 2}});
  ASSERT_TRUE(small.ok()) << small.status();
}

TEST_F(PlanLimitsTest, ABudgetSmallerThanOnePlanRefusesIt) {
  std::shared_ptr<const Model> model = AddModel(0);
  ASSERT_NE(model, nullptr);
  InstanceBudget budget(64 << 10);
  StreamSessionOptions options;
  options.budget = &budget;
  std::unique_ptr<StreamSession> session = Session(model, options);
  ASSERT_NE(session, nullptr);
  std::vector<NamedTensor> small = {{"x", testing::FloatTensor({2, 2}, {1, 2, 3, 4})}};
  ASSERT_TRUE(session->Run(small).ok());
  EXPECT_GT(budget.used(), 0u);  // the plan's buffers count, not only its arena
  std::vector<NamedTensor> big = {
      {"x", testing::FloatTensor({128, 128}, std::vector<float>(128 * 128, 1.0f))}};
  absl::StatusOr<std::vector<NamedTensor>> out = session->Run(big);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("capture.memory_budget_bytes (65536)"));
  EXPECT_LE(budget.used(), budget.limit());
  session.reset();
  EXPECT_EQ(budget.used(), 0u);
}

TEST_F(PlanLimitsTest, EvictedSignaturesAreForgottenBeyondABound) {
  std::shared_ptr<const Model> model = AddModel(0);
  ASSERT_NE(model, nullptr);
  StreamSessionOptions options;
  options.max_instances = 2;
  std::unique_ptr<StreamSession> session = Session(model, options);
  ASSERT_NE(session, nullptr);
  for (int n = 1; n <= 300; ++n) {
    std::vector<NamedTensor> in = {
        {"x", testing::FloatTensor({1, n}, std::vector<float>(static_cast<size_t>(n), 1.0f))}};
    ASSERT_TRUE(session->Run(in).ok());
  }
  // Two live, and a bounded history of evicted signatures (not 300).
  EXPECT_EQ(session->counters().live_instances, 2u);
  EXPECT_LE(session->ListInstances().size(), 64u);
}

}  // namespace
}  // namespace reprise::runtime::engine
