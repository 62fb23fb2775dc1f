// StreamSession's device path (DevicePlan) on the CPU backend, where it runs without a GPU
// (StreamSessionOptions::device_plans): the plan relocated into Device::Malloc memory, inputs
// staged into pinned memory, the H2D / D2H copies recorded in the instance, constants uploaded
// once and shared, batch views with padding rows, and eviction. tests/cuda/ runs the same path
// on a GPU.
#include <memory>
#include <span>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/engine/device_plan.h"
#include "runtime/engine/stream_session.h"
#include "tests/runtime/core/core_test_util.h"
#include "tests/runtime/engine/test_models.h"

namespace reprise::runtime::engine {
namespace {

using testing::Floats;
using testing::FloatTensor;
using ::testing::HasSubstr;
using testing::ModelBuilder;

constexpr int64_t kWidth = 64;

class StreamSessionDeviceTest : public runtime::testing::CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();  // the CPU device with its kernels
    if (HasFatalFailure()) return;
    // y = relu(x W + b): 16 KiB of weights that every plan reads.
    ModelBuilder b;
    b.Input("x", onnx::TensorProto::FLOAT, {-1, kWidth}).Output("y", {-1, kWidth});
    b.FloatInit("w", {kWidth, kWidth}, testing::RandomFloats(kWidth * kWidth, 7));
    b.FloatInit("b", {kWidth}, testing::RandomFloats(kWidth, 8));
    b.Node("MatMul", {"x", "w"}, {"xw"});
    b.Node("Add", {"xw", "b"}, {"z"});
    b.Node("Relu", {"z"}, {"y"});
    auto model = Model::LoadBytes(b.Bytes(), *device_->kernels());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::unique_ptr<StreamSession> NewSession(ExecMode mode, StreamSessionOptions options = {}) {
    options.device_plans = true;
    auto session = StreamSession::Create(model_, device_, mode, options);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  static std::vector<NamedTensor> Inputs(int64_t n, uint32_t seed) {
    return {{"x", FloatTensor({n, kWidth},
                              testing::RandomFloats(static_cast<size_t>(n * kWidth), seed))}};
  }

  std::vector<float> Want(const std::vector<NamedTensor>& inputs) const {
    auto out = testing::RunPlan(*model_, inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Floats((*out)[0].value) : std::vector<float>{};
  }

  std::shared_ptr<const Model> model_;
};

TEST_F(StreamSessionDeviceTest, TheInstanceRecordsTheCopiesAndReplaysNewInputs) {
  std::unique_ptr<StreamSession> session = NewSession(ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->device_plans());
  for (uint32_t seed : {1u, 2u, 3u}) {
    StreamRunInfo info;
    const std::vector<NamedTensor> inputs = Inputs(2, seed);
    auto out = session->Run(inputs, &info);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].value.shape, (Shape{2, kWidth}));
    EXPECT_EQ(Floats((*out)[0].value), Want(inputs)) << seed;
    EXPECT_TRUE(info.replayed);
    EXPECT_EQ(info.captured, seed == 1u);
  }
  // One instance: the input's H2D copy, the step(s), the output's D2H copy.
  absl::StatusOr<std::string> dump = session->DumpInstance("x:[2,64]", /*verbose=*/true);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("\"direction\": \"h2d\""));
  EXPECT_THAT(*dump, HasSubstr("\"direction\": \"d2h\""));
  const StreamSessionCounters counters = session->counters();
  EXPECT_EQ(counters.captures, 1u);
  EXPECT_EQ(counters.replays, 3u);
  EXPECT_EQ(counters.staged_bytes, 3u * 2 * kWidth * sizeof(float));
}

// A batch as the server stages it: the rows of two requests as two pieces, then padding rows,
// which stage as zeros (relu(0 W + b) in the output).
TEST_F(StreamSessionDeviceTest, BatchViewsStageTheirPiecesAndZeroPadding) {
  std::unique_ptr<StreamSession> session = NewSession(ExecMode::kReplay);
  ASSERT_NE(session, nullptr);
  const std::vector<float> a = testing::RandomFloats(kWidth, 11);
  const std::vector<float> b = testing::RandomFloats(2 * kWidth, 12);
  std::vector<float> whole(a);
  whole.insert(whole.end(), b.begin(), b.end());
  whole.resize(4 * kWidth, 0.0f);  // one padding row
  InputView view;
  view.dtype = DataType::kFloat32;
  view.shape = {4, kWidth};
  for (const std::vector<float>* rows : {&a, &b}) {
    view.pieces.emplace_back(reinterpret_cast<const uint8_t*>(rows->data()),
                             rows->size() * sizeof(float));
  }
  const std::vector<float> want = Want({{"x", FloatTensor({4, kWidth}, whole)}});
  for (int run = 0; run < 2; ++run) {  // capture, then replay
    std::vector<float> got;
    absl::Status status =
        session->Run(Model::AssumeValidated({view}), [&](size_t index, const PlanTensor& out) {
          EXPECT_EQ(index, 0u);
          got.assign(reinterpret_cast<const float*>(out.data),
                     reinterpret_cast<const float*>(out.data) + out.bytes / sizeof(float));
          return absl::OkStatus();
        });
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(got, want) << "run " << run;
  }
}

TEST_F(StreamSessionDeviceTest, SessionsShareTheModelsConstantsOnTheDevice) {
  auto constants = DeviceConstants::Create(*model_, device_);
  ASSERT_TRUE(constants.ok()) << constants.status();
  EXPECT_EQ((*constants)->bytes(), (kWidth * kWidth + kWidth) * sizeof(float));
  StreamSessionOptions options;
  options.device_constants = *constants;
  std::unique_ptr<StreamSession> first = NewSession(ExecMode::kReplay, options);
  ASSERT_NE(first, nullptr);
  const std::vector<NamedTensor> inputs = Inputs(1, 5);
  auto out = first->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Want(inputs));

  // A second session of the model uploads no weights of its own: its plan's device memory is
  // less than the weights alone.
  const uint64_t before = device_->memory_stats().device_in_use;
  std::unique_ptr<StreamSession> second = NewSession(ExecMode::kReplay, options);
  ASSERT_NE(second, nullptr);
  out = second->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats((*out)[0].value), Want(inputs));
  EXPECT_LT(device_->memory_stats().device_in_use - before, (*constants)->bytes());

  // Constants of another device are refused.
  auto other = CreateBackend("cpu");
  ASSERT_TRUE(other.ok());
  auto other_device = (*other)->device(0);
  ASSERT_TRUE(other_device.ok());
  auto plan = model_->Plan({{1, kWidth}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto placed = DevicePlan::Create(*model_, **plan, *other_device, *constants);
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamSessionDeviceTest, EvictedDevicePlansAreMadeAgainOnUse) {
  StreamSessionOptions options;
  options.max_instances = 1;
  std::unique_ptr<StreamSession> session = NewSession(ExecMode::kReplay, options);
  ASSERT_NE(session, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (int64_t n : {1, 3}) {
      const std::vector<NamedTensor> inputs = Inputs(n, static_cast<uint32_t>(round * 10 + n));
      auto out = session->Run(inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Floats((*out)[0].value), Want(inputs)) << "n=" << n;
    }
  }
  EXPECT_EQ(session->counters().live_instances, 1u);
  EXPECT_EQ(session->counters().evictions, 3u);
  EXPECT_EQ(session->counters().captures, 4u);
}

}  // namespace
}  // namespace reprise::runtime::engine
