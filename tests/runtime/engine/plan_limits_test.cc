// limits.max_plan_bytes and allocation failures at the plan boundary (hostile-input issue).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream_session.h"
#include "runtime/engine/validated_inputs.h"
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

  // z = NonZero(x), x float [rows, cols], planned per input value as one model (not cut).
  std::shared_ptr<const Model> NonZeroModel(int64_t rows, int64_t cols) {
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {rows, cols})
        .Output("z", {2, -1}, onnx::TensorProto::INT64);
    b.Node("NonZero", {"x"}, {"z"});
    ModelOptions whole;
    whole.split_at_value_dependent_nodes = false;
    auto model = Model::LoadBytes(b.Bytes(), registry_, whole);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  // `b`'s graph ending in z = NonZero(ReduceMax(`from`) over axis 1), loaded under a cap of
  // `max_plan_bytes`: planned per input value, so its nodes are computed while planning.
  std::shared_ptr<const Model> KeyedByRowMaxes(ModelBuilder* b, const std::string& from,
                                               int64_t max_plan_bytes) {
    onnx::NodeProto& reduce = b->Node("ReduceMax", {from}, {"m"});
    testing::SetIntsAttr(&reduce, "axes", {1});
    testing::SetIntAttr(&reduce, "keepdims", 0);
    b->Node("NonZero", {"m"}, {"z"});
    ModelOptions options;
    options.max_plan_bytes = max_plan_bytes;
    auto model = Model::LoadBytes(b->Bytes(), registry_, options);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    EXPECT_TRUE((*model)->keyed_by_all_values());
    return *model;
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

// A plan keyed by a whole input's value is refused under the budget naming that input by its
// shape, size and hash, as the instance list does, and not by its bytes (64 KiB here).
TEST_F(PlanLimitsTest, ABudgetRefusalOfAPlanKeyedByAWholeInputNamesItsSizeNotItsBytes) {
  std::shared_ptr<const Model> model = NonZeroModel(128, 128);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->keyed_by_all_values());
  InstanceBudget budget(32 << 10);
  StreamSessionOptions options;
  options.budget = &budget;
  std::unique_ptr<StreamSession> session = Session(model, options);
  ASSERT_NE(session, nullptr);
  std::vector<float> x(128 * 128, 0.0f);
  x[5] = 1.0f;
  absl::StatusOr<std::vector<NamedTensor>> out =
      session->Run({{"x", testing::FloatTensor({128, 128}, x)}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("the plan for x:[128,128]=<65536 bytes #"));
  EXPECT_LT(out.status().message().size(), 1000u);
}

// A plan made for a whole input's value stages only that value: its cache key is a digest of
// the bytes, and a digest that collides must fail the run, never run another input's plan.
TEST_F(PlanLimitsTest, APlanKeyedByAWholeInputStagesOnlyThatValue) {
  std::shared_ptr<const Model> model = NonZeroModel(2, 40);
  ASSERT_NE(model, nullptr);
  std::vector<float> x(80, 0.0f);
  x[3] = 1.0f;
  const TensorValue xv = testing::FloatTensor({2, 40}, x);
  bool keyed = false;
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = model->PlanForInputs({&xv}, &keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(keyed);
  auto view_of = [](const TensorValue& v) {
    InputView view;
    view.dtype = v.dtype;
    view.shape = v.shape;
    view.pieces.push_back(std::span<const uint8_t>(v.bytes.data(), v.bytes.size()));
    return view;
  };
  absl::StatusOr<size_t> same = (*plan)->StageView(0, view_of(xv));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, xv.bytes.size());
  std::vector<float> y = x;
  y[79] = 2.0f;
  const TensorValue yv = testing::FloatTensor({2, 40}, y);
  absl::StatusOr<size_t> other = (*plan)->StageView(0, view_of(yv));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("differs from the value this plan was made for"));
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

// A model planned per input value (a NonZero at its end) computes its graph while planning: each
// value is freed once no node reads it any more, so that the plan keeps what it returns (and its
// fixed input) and the cap counts the values alive at once, not their sum. Sixteen 64 KiB
// intermediates (1 MiB in all) plan under a 512 KiB cap.
TEST_F(PlanLimitsTest, APlanComputedWhilePlanningKeepsOnlyWhatItReturns) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {128, 128}).Output("z", {1, -1}, onnx::TensorProto::INT64);
  std::string prev = "x";
  for (int i = 0; i < 16; ++i) {
    const std::string next = absl::StrCat("a", i);
    b.Node("Add", {prev, "x"}, {next});
    prev = next;
  }
  std::shared_ptr<const Model> model = KeyedByRowMaxes(&b, prev, 512 << 10);
  ASSERT_NE(model, nullptr);

  // x: row r holds r - 64 everywhere, so m[r] = 17 (r - 64), zero for row 64 only.
  std::vector<float> x(128 * 128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i / 128) - 64);
  const TensorValue xv = testing::FloatTensor({128, 128}, x);
  bool keyed = false;
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = model->PlanForInputs({&xv}, &keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(keyed);
  EXPECT_TRUE((*plan)->steps().empty());
  // The arena, the fixed x and z: no intermediate.
  EXPECT_EQ((*plan)->OwnedRegions().size(), 3u);
  EXPECT_LT((*plan)->owned_bytes(), 3u * 65536u);

  absl::StatusOr<std::vector<NamedTensor>> out = testing::RunPlan(*model, {{"x", xv}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  std::vector<int64_t> want;
  for (int64_t r = 0; r < 128; ++r) {
    if (r != 64) want.push_back(r);
  }
  EXPECT_EQ((*out)[0].value.shape, (Shape{1, 127}));
  EXPECT_EQ(testing::Int64s((*out)[0].value), want);
}

// A value computed at plan time that only one node reads, and that node's output of the same
// size, share their bytes: a ScatterElements updates it in place, and a Cast to the type it has
// and a Reshape take it as it is. The fixed x (64 KiB) and four 64 KiB values in turn (2x, the
// scatter, the cast, the reshape) plan under a 160 KiB cap; one new value per node would hold
// three at once.
TEST_F(PlanLimitsTest, AValueComputedWhilePlanningIsUpdatedInPlaceByItsLastReader) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {128, 128})
      .Output("r", {16384})
      .Output("z", {1, -1}, onnx::TensorProto::INT64);
  b.Int64Init("rows", {1, 128}, std::vector<int64_t>(128, 3));
  b.FloatInit("sevens", {1, 128}, std::vector<float>(128, 7.0f));
  b.Int64Init("flat", {1}, {16384});
  b.Node("Add", {"x", "x"}, {"a"});
  testing::SetIntAttr(&b.Node("ScatterElements", {"a", "rows", "sevens"}, {"s"}), "axis", 0);
  testing::SetIntAttr(&b.Node("Cast", {"s"}, {"c"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Reshape", {"c", "flat"}, {"r"});
  std::shared_ptr<const Model> model = KeyedByRowMaxes(&b, "x", 160 << 10);
  ASSERT_NE(model, nullptr);

  const std::vector<float> x = testing::RandomFloats(128 * 128, 11);
  const TensorValue xv = testing::FloatTensor({128, 128}, x);
  bool keyed = false;
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan = model->PlanForInputs({&xv}, &keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE((*plan)->steps().empty());

  absl::StatusOr<std::vector<NamedTensor>> out = testing::RunPlan(*model, {{"x", xv}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<float> want;
  for (size_t i = 0; i < x.size(); ++i) want.push_back(i / 128 == 3 ? 7.0f : x[i] + x[i]);
  EXPECT_EQ((*out)[0].value.shape, (Shape{16384}));
  EXPECT_EQ(testing::Floats((*out)[0].value), want);
}

// The same scatter, but a later node also reads its first input: the scatter writes a new value.
TEST_F(PlanLimitsTest, AValueComputedWhilePlanningThatALaterNodeReadsIsNotUpdatedInPlace) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {4, 4})
      .Output("s", {4, 4})
      .Output("t", {4, 4})
      .Output("z", {2, -1}, onnx::TensorProto::INT64);
  b.Int64Init("rows", {1, 4}, {3, 3, 3, 3});
  b.FloatInit("sevens", {1, 4}, {7, 7, 7, 7});
  b.Node("Add", {"x", "x"}, {"a"});
  testing::SetIntAttr(&b.Node("ScatterElements", {"a", "rows", "sevens"}, {"s"}), "axis", 0);
  b.Node("Neg", {"a"}, {"t"});
  b.Node("NonZero", {"x"}, {"z"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->keyed_by_all_values());
  const std::vector<float> x = testing::RandomFloats(16, 12);
  absl::StatusOr<std::vector<NamedTensor>> out =
      testing::RunPlan(**model, {{"x", testing::FloatTensor({4, 4}, x)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  std::vector<float> scattered, negated;
  for (size_t i = 0; i < x.size(); ++i) {
    scattered.push_back(i / 4 == 3 ? 7.0f : x[i] + x[i]);
    negated.push_back(-(x[i] + x[i]));
  }
  EXPECT_EQ(testing::Floats((*out)[0].value), scattered);
  EXPECT_EQ(testing::Floats((*out)[1].value), negated);
}

// A value computed at plan time that a step reads when the plan runs is kept, though no later node
// reads it: f = ReduceSum(Cast(Shape(x))) (N + 4) is read by the step x + f, and the values
// computed after it (g = Cast(Shape(x)) * 1000, an output) would take its memory if it were freed.
TEST_F(PlanLimitsTest, AValueComputedWhilePlanningThatAStepReadsIsKept) {
  ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 4}).Output("y", {-1, 4}).Output("g", {2});
  b.FloatInit("k", {1}, {1000.0f});
  b.Node("Shape", {"x"}, {"s"});
  testing::SetIntAttr(&b.Node("Cast", {"s"}, {"c"}), "to", onnx::TensorProto::FLOAT);
  b.Node("ReduceSum", {"c"}, {"f"});
  b.Node("Add", {"x", "f"}, {"y"});
  b.Node("Mul", {"c", "k"}, {"g"});
  auto model = Model::LoadBytes(b.Bytes(), registry_);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int64_t n : {1, 3, 5}) {
    SCOPED_TRACE(n);
    const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(4 * n), 9);
    absl::StatusOr<std::vector<NamedTensor>> out =
        testing::RunPlan(**model, {{"x", testing::FloatTensor({n, 4}, x)}});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    std::vector<float> want;
    for (float v : x) want.push_back(v + static_cast<float>(n + 4));
    EXPECT_EQ(testing::Floats((*out)[0].value), want);
    EXPECT_EQ(testing::Floats((*out)[1].value),
              (std::vector<float>{1000.0f * static_cast<float>(n), 4000.0f}));
  }
}

}  // namespace
}  // namespace reprise::runtime::engine
