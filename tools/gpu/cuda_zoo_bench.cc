// cuda_zoo_bench: runs one ONNX model of the zoo on the CUDA backend and on the CPU backend,
// compares the outputs, and times batch-1 inference on the GPU launched eagerly (every kernel
// enqueued per request) against replaying one captured instance (a CUDA graph).
//
//   cuda_zoo_bench --model M.onnx --input in.npy [--expected out.npy] [--iters 200]
//                  [--warmup 20] [--name mlp]
//
// Prints one line: name, steps, eager and graph-replay microseconds per inference (median of
// --iters, each inference = pinned H2D copy of the input, every kernel, D2H copy of the outputs,
// then a stream synchronise), their ratio, and the largest difference against the CPU backend
// (and against --expected). Exit 0 when the GPU matches, 1 when it does not, 2 on an error,
// 77 when no GPU is usable (skip).
//
// The engine plans in host memory; runtime/engine/device_plan.h relocates the plan into device
// memory and stages inputs and outputs through pinned memory.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"
#include "runtime/engine/device_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/npy.h"

namespace reprise::tools {
namespace {

using runtime::Device;
using runtime::TensorValue;
using runtime::engine::ExecutionPlan;
using runtime::engine::Model;
using runtime::engine::NamedTensor;

struct Options {
  std::string model, input, expected, name = "model";
  int iters = 200, warmup = 20;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

double MaxDiff(const TensorValue& a, const void* b_bytes) {
  if (a.dtype != runtime::DataType::kFloat32) {
    return std::memcmp(a.bytes.data(), b_bytes, a.bytes.size()) == 0 ? 0.0 : INFINITY;
  }
  const auto* x = reinterpret_cast<const float*>(a.bytes.data());
  const auto* y = static_cast<const float*>(b_bytes);
  double worst = 0.0;
  for (size_t i = 0; i < a.bytes.size() / sizeof(float); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - y[i]) / (1.0 + std::fabs(x[i]));
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  return worst;
}

absl::StatusOr<int> Main(const Options& options) {
  ASSIGN_OR_RETURN(TensorValue input, runtime::engine::ReadNpyFile(options.input));
  // CPU reference.
  ASSIGN_OR_RETURN(auto cpu_backend, runtime::CreateBackend("cpu"));
  ASSIGN_OR_RETURN(Device * cpu, cpu_backend->device(0));
  RETURN_IF_ERROR(kernels::cpu::RegisterCpuKernels(cpu->kernels()));
  ASSIGN_OR_RETURN(auto cpu_model, Model::LoadFile(options.model, *cpu->kernels()));
  std::vector<NamedTensor> named = {{cpu_model->inputs()[0].name, input}};
  ASSIGN_OR_RETURN(auto cpu_inputs, cpu_model->MatchInputs(named));
  bool value_keyed = false;
  ASSIGN_OR_RETURN(auto cpu_plan, cpu_model->PlanForInputs(cpu_inputs, &value_keyed));
  ASSIGN_OR_RETURN(std::vector<NamedTensor> reference, cpu_plan->Run(cpu_inputs));
  double expected_diff = 0.0;
  if (!options.expected.empty()) {
    ASSIGN_OR_RETURN(TensorValue expected, runtime::engine::ReadNpyFile(options.expected));
    expected_diff = MaxDiff(expected, reference[0].value.bytes.data());
  }

  // The GPU.
  auto backend = runtime::CreateBackend("cuda");
  if (!backend.ok()) {
    std::printf("%s: SKIP (%s)\n", options.name.c_str(),
                std::string(backend.status().message()).c_str());
    return 77;
  }
  ASSIGN_OR_RETURN(Device * gpu, (*backend)->device(0));
  RETURN_IF_ERROR(kernels::cuda::RegisterCudaKernels(gpu->kernels()));
  ASSIGN_OR_RETURN(auto model, Model::LoadFile(options.model, *gpu->kernels()));
  ASSIGN_OR_RETURN(auto inputs, model->MatchInputs(named));
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model->PlanForInputs(inputs, &value_keyed));

  ASSIGN_OR_RETURN(auto device_plan, runtime::engine::DevicePlan::Create(*model, *plan, gpu));
  RETURN_IF_ERROR(device_plan->StageInput(0, input));
  ASSIGN_OR_RETURN(auto stream, gpu->CreateStream());
  auto enqueue = [&]() { return device_plan->Enqueue(stream.get()); };
  using Clock = std::chrono::steady_clock;
  auto time_runs = [&](auto&& run_once) -> absl::StatusOr<double> {
    for (int i = 0; i < options.warmup; ++i) {
      RETURN_IF_ERROR(run_once());
      RETURN_IF_ERROR(stream->Synchronize());
    }
    std::vector<double> micros;
    for (int i = 0; i < options.iters; ++i) {
      const auto start = Clock::now();
      RETURN_IF_ERROR(run_once());
      RETURN_IF_ERROR(stream->Synchronize());
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    return Median(micros);
  };
  auto compare = [&]() {
    double worst = 0.0;
    for (size_t i = 0; i < reference.size(); ++i) {
      const TensorValue out = device_plan->ReadOutput(i);
      worst = std::max(worst, MaxDiff(reference[i].value, out.bytes.data()));
    }
    return worst;
  };

  device_plan->FillOutputs(0xff);  // NaN: a run that writes nothing cannot pass
  ASSIGN_OR_RETURN(double eager_us, time_runs(enqueue));
  const double eager_diff = compare();

  RETURN_IF_ERROR(runtime::BeginCapture(stream.get(), runtime::CaptureMode::kGlobal));
  absl::Status captured = enqueue();
  auto ri = runtime::EndCapture(stream.get());
  RETURN_IF_ERROR(captured);
  RETURN_IF_ERROR(ri.status());
  device_plan->FillOutputs(0xff);
  ASSIGN_OR_RETURN(double graph_us,
                   time_runs([&] { return runtime::ExecuteAsync(**ri, stream.get()); }));
  const double replay_diff = compare();

  const double tolerance = 1e-3;
  const bool pass = eager_diff <= tolerance && replay_diff <= tolerance;
  std::printf(
      "%s: steps=%zu eager_us=%.1f graph_us=%.1f speedup=%.2fx diff_vs_cpu_eager=%.2e "
      "diff_vs_cpu_replay=%.2e cpu_vs_expected=%.2e %s\n",
      options.name.c_str(), device_plan->num_steps(), eager_us, graph_us, eager_us / graph_us,
      eager_diff, replay_diff, expected_diff, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace reprise::tools

int main(int argc, char** argv) {
  reprise::tools::Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") {
      options.model = value;
    } else if (flag == "--input") {
      options.input = value;
    } else if (flag == "--expected") {
      options.expected = value;
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--iters") {
      options.iters = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--warmup") {
      options.warmup = std::max(0, std::atoi(value.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (options.model.empty() || options.input.empty()) {
    std::fprintf(stderr,
                 "usage: cuda_zoo_bench --model M.onnx --input in.npy [--expected "
                 "out.npy] [--iters N] [--warmup N] [--name NAME]\n");
    return 2;
  }
  auto result = reprise::tools::Main(options);
  if (!result.ok()) {
    std::printf("%s: ERROR %s\n", options.name.c_str(),
                std::string(result.status().message()).c_str());
    return 2;
  }
  return *result;
}
