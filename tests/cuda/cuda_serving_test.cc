// Serving on a GPU (label gpu; skipped with the driver's message where no GPU can be used): the
// zoo's models through StreamSession on cuda:0 (device plans captured as CUDA graphs, replayed
// per shape) and through the engine backend with a KIND_GPU instance group, against the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/engine/npy.h"
#include "runtime/engine/stream_session.h"
#include "server/engine_backend.h"

namespace reprise {
namespace {

using runtime::engine::ExecMode;
using runtime::engine::NamedTensor;
using runtime::engine::StreamSession;
using ::testing::HasSubstr;

const std::string kZoo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/zoo/";
const std::string kRepo = std::string(REPRISE_SOURCE_DIR) + "/tools/models/repository/";

std::vector<float> Floats(const void* data, size_t bytes) {
  std::vector<float> v(bytes / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), data, bytes);
  return v;
}

// |got - want| <= 1e-4 * max|want| elementwise (the zoo tests' tolerance; FP32 on both).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * std::max(scale, 1.0f)) << "element " << i;
  }
}

class CudaServingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto cuda = runtime::CreateBackend("cuda");
    if (!cuda.ok()) GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
    cuda_ = *std::move(cuda);
    auto gpu = cuda_->device(0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *gpu;
    ASSERT_TRUE(kernels::cuda::RegisterCudaKernels(gpu_->kernels()).ok());
    auto cpu = runtime::CreateBackend("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_backend_ = *std::move(cpu);
    cpu_ = *cpu_backend_->device(0);
    ASSERT_TRUE(kernels::cpu::RegisterCpuKernels(cpu_->kernels()).ok());
  }

  std::unique_ptr<StreamSession> Session(runtime::Device* device, ExecMode mode) {
    auto model =
        runtime::engine::Model::LoadFile(kZoo + GetParam() + "/model.onnx", *device->kernels());
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    auto session = StreamSession::Create(*model, device, mode);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  std::unique_ptr<runtime::Backend> cuda_, cpu_backend_;
  runtime::Device* gpu_ = nullptr;
  runtime::Device* cpu_ = nullptr;
};

// Each batch twice on the GPU (capture, then replay) and once eagerly: all equal the CPU.
TEST_P(CudaServingTest, StreamSessionOnTheGpuEqualsTheCpu) {
  std::unique_ptr<StreamSession> replay = Session(gpu_, ExecMode::kReplay);
  std::unique_ptr<StreamSession> eager = Session(gpu_, ExecMode::kEager);
  std::unique_ptr<StreamSession> reference = Session(cpu_, ExecMode::kEager);
  ASSERT_TRUE(replay && eager && reference);
  EXPECT_TRUE(replay->device_plans());
  for (const char* batch : {"b1", "b4"}) {
    SCOPED_TRACE(batch);
    auto input = runtime::engine::ReadNpyFile(kZoo + GetParam() + "/input_" + batch + ".npy");
    ASSERT_TRUE(input.ok()) << input.status();
    const std::vector<NamedTensor> inputs = {{replay->model().inputs()[0].name, *input}};
    auto want = reference->Run(inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int run = 0; run < 2; ++run) {
      runtime::engine::StreamRunInfo info;
      auto got = replay->Run(inputs, &info);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(info.replayed) << info.capture_error;
      EXPECT_EQ(info.captured, run == 0);
      for (size_t i = 0; i < want->size(); ++i) {
        EXPECT_EQ((*got)[i].value.shape, (*want)[i].value.shape);
        ExpectClose(Floats((*got)[i].value.bytes.data(), (*got)[i].value.bytes.size()),
                    Floats((*want)[i].value.bytes.data(), (*want)[i].value.bytes.size()));
      }
    }
    auto got = eager->Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectClose(Floats((*got)[0].value.bytes.data(), (*got)[0].value.bytes.size()),
                Floats((*want)[0].value.bytes.data(), (*want)[0].value.bytes.size()));
  }
  for (const auto& instance : replay->ListInstances()) {
    EXPECT_EQ(instance.state, "captured") << instance.shape_signature << ": " << instance.reason;
  }
  // The captured CUDA graph holds the copies in and out.
  const std::string signature = replay->ListInstances()[0].shape_signature;
  auto dump = replay->DumpInstance(signature, /*verbose=*/true);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(*dump, HasSubstr("\"direction\": \"h2d\""));
  EXPECT_THAT(*dump, HasSubstr("\"direction\": \"d2h\""));
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaServingTest, ::testing::Values("mlp", "transformer"),
                         [](const auto& param_info) { return std::string(param_info.param); });

// The engine backend with `instance_group: [{kind: KIND_GPU, gpus: [0]}]`: the model loads on
// cuda:0 and answers like the same model on the CPU, batch by batch.
TEST(CudaServingBackendTest, KindGpuModelServesOnCuda0LikeTheCpu) {
#if !REPRISE_SERVE_CUDA
  GTEST_SKIP() << "reprise_server_engine built without the CUDA backend";
#endif
  if (auto cuda = runtime::CreateBackend("cuda"); !cuda.ok()) {
    GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
  }
  auto backend = server::EngineBackend::Create();
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto settings = [](const std::string& kind) {
    auto s = config::ParseModelSettings(
        "max_batch_size: 8\ninstance_group: [{count: 2, kind: " + kind + "}]\n", "test", "mlp");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : config::ModelSettings{};
  };
  const config::ModelSettings gpu_settings = settings("KIND_GPU, gpus: [0]");
  const config::ModelSettings cpu_settings = settings("KIND_CPU");
  auto load = [&](const config::ModelSettings& s) {
    server::LoadSpec spec;
    spec.model_name = "mlp";
    spec.version = 1;
    spec.model_path = kRepo + "mlp/1/model.onnx";
    spec.settings = &s;
    spec.streams = 2;
    return (*backend)->Load(spec);
  };
  auto gpu = load(gpu_settings);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = load(cpu_settings);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (const char* batch : {"b1", "b4", "b4"}) {
    auto input = runtime::engine::ReadNpyFile(kZoo + "mlp/input_" + std::string(batch) + ".npy");
    ASSERT_TRUE(input.ok()) << input.status();
    server::InputTensor in;
    in.name = "input";
    in.dtype = input->dtype;
    in.shape = input->shape;
    in.data =
        absl::string_view(reinterpret_cast<const char*>(input->bytes.data()), input->bytes.size());
    const std::vector<server::InputTensor> inputs = {in};
    const std::vector<std::string> outputs = {"output"};
    auto want = (*cpu)->Infer(inputs, outputs, nullptr);
    auto got = (*gpu)->Infer(inputs, outputs, nullptr);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].shape, (*want)[0].shape);
    ExpectClose(Floats((*got)[0].data.data(), (*got)[0].data.size()),
                Floats((*want)[0].data.data(), (*want)[0].data.size()));
  }
  for (const server::RuntimeInstanceInfo& ri : (*gpu)->ListRuntimeInstances()) {
    EXPECT_EQ(ri.state, "CAPTURED") << ri.shape_signature;
  }
  bool listed = false;
  for (const server::DeviceMemoryInfo& m : (*backend)->MemoryUsage()) {
    if (m.device == "cuda:0") listed = m.in_use > 0;
  }
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace reprise
