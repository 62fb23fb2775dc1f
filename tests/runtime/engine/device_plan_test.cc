// DevicePlan on the CPU backend (whose "device" memory is host memory): the relocated steps,
// run eagerly on a stream and replayed from a captured instance, give the plan's own outputs.
#include "runtime/engine/device_plan.h"

#include <string>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/capture.h"
#include "runtime/engine/npy.h"

namespace reprise::runtime::engine {
namespace {

class DevicePlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DevicePlanTest, EagerAndReplayMatchThePlan) {
  const std::string dir = std::string(REPRISE_SOURCE_DIR) + "/tools/models/zoo/" + GetParam();
  auto backend = CreateBackend("cpu");
  ASSERT_TRUE(backend.ok());
  auto device = (*backend)->device(0);
  ASSERT_TRUE(device.ok());
  ASSERT_TRUE(kernels::cpu::RegisterCpuKernels((*device)->kernels()).ok());
  auto model = Model::LoadFile(dir + "/model.onnx", *(*device)->kernels());
  ASSERT_TRUE(model.ok()) << model.status();
  auto input = ReadNpyFile(dir + "/input_b1.npy");
  ASSERT_TRUE(input.ok()) << input.status();
  std::vector<NamedTensor> named = {{(*model)->inputs()[0].name, *input}};
  auto inputs = (*model)->MatchInputs(named);
  ASSERT_TRUE(inputs.ok());
  bool value_keyed = false;
  auto plan = (*model)->PlanForInputs(*inputs, &value_keyed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto expected = (*plan)->Run(*inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();

  auto device_plan = DevicePlan::Create(**model, **plan, *device);
  ASSERT_TRUE(device_plan.ok()) << device_plan.status();
  EXPECT_EQ((*device_plan)->num_steps(), (*plan)->steps().size());
  EXPECT_GT((*device_plan)->device_bytes(), 0u);
  ASSERT_TRUE((*device_plan)->StageInput(0, *input).ok());
  auto stream = (*device)->CreateStream();
  ASSERT_TRUE(stream.ok());
  (*device_plan)->FillOutputs(0xff);
  ASSERT_TRUE((*device_plan)->Enqueue(stream->get()).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ((*device_plan)->ReadOutput(0).bytes, (*expected)[0].value.bytes);

  ASSERT_TRUE(BeginCapture(stream->get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE((*device_plan)->Enqueue(stream->get()).ok());
  auto ri = EndCapture(stream->get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  for (int replay = 0; replay < 2; ++replay) {
    (*device_plan)->FillOutputs(0xff);
    ASSERT_TRUE(ExecuteAsync(**ri, stream->get()).ok());
    ASSERT_TRUE((*stream)->Synchronize().ok());
    EXPECT_EQ((*device_plan)->ReadOutput(0).bytes, (*expected)[0].value.bytes) << replay;
  }
  // A new input staged between replays reaches the next replay.
  TensorValue doubled = *input;
  auto* values = reinterpret_cast<float*>(doubled.bytes.data());
  for (size_t i = 0; i < doubled.bytes.size() / sizeof(float); ++i) values[i] *= 2.0f;
  std::vector<NamedTensor> named2 = {{(*model)->inputs()[0].name, doubled}};
  auto inputs2 = (*model)->MatchInputs(named2);
  ASSERT_TRUE(inputs2.ok());
  auto expected2 = (*plan)->Run(*inputs2);
  ASSERT_TRUE(expected2.ok());
  ASSERT_NE((*expected2)[0].value.bytes, (*expected)[0].value.bytes);
  ASSERT_TRUE((*device_plan)->StageInput(0, doubled).ok());
  ASSERT_TRUE(ExecuteAsync(**ri, stream->get()).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ((*device_plan)->ReadOutput(0).bytes, (*expected2)[0].value.bytes);
  // A wrongly sized input is refused.
  TensorValue wrong = *input;
  wrong.bytes.resize(4);
  EXPECT_FALSE((*device_plan)->StageInput(0, wrong).ok());
}

INSTANTIATE_TEST_SUITE_P(Zoo, DevicePlanTest, ::testing::Values("mlp", "transformer"),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace reprise::runtime::engine
