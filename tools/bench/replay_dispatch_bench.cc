// Cost per task of replaying a captured instance of 1,000 tiny kernels versus enqueuing the same
// 1,000 kernels eagerly, both on one stream (and, as the floor, calling Run directly).
// Run: build/release/tools/replay_dispatch_bench --benchmark_repetitions=5
// The `per_task` counter is seconds per task (e.g. "21.3n" = 21.3 ns).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/core/capture.h"
#include "runtime/core/device.h"

namespace reprise::runtime {
namespace {

constexpr int kTasks = 1000;

// out[0] = in[0] + 1: the smallest kernel that still reads and writes memory.
class TinyKernel final : public PreparedKernel {
 public:
  absl::string_view op() const override { return "Tiny"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs& args) const override {
    *static_cast<float*>(args.outputs[0]) = *static_cast<const float*>(args.inputs[0]) + 1.0f;
    return absl::OkStatus();
  }

 private:
  std::vector<TensorDesc> outputs_{TensorDesc{DataType::kFloat32, {1}}};
};

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "replay_dispatch_bench: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

struct Setup {
  std::unique_ptr<Backend> backend;
  Device* device = nullptr;
  std::unique_ptr<Stream> stream;
  TinyKernel kernel;
  float* buffer = nullptr;  // kTasks + 1 floats: task i reads buffer[i], writes buffer[i + 1]

  Setup() {
    auto created = CreateBackend("cpu");
    Check(created.status());
    backend = std::move(created).value();
    device = backend->device(0).value();
    stream = std::move(device->CreateStream()).value();
    buffer = static_cast<float*>(device->Malloc((kTasks + 1) * sizeof(float)).value());
    for (int i = 0; i <= kTasks; ++i) buffer[i] = 0.0f;
  }
  ~Setup() { Check(device->Free(buffer)); }

  absl::Status EnqueueAll() {
    for (int i = 0; i < kTasks; ++i) {
      const void* in[] = {buffer + i};
      void* out[] = {buffer + i + 1};
      absl::Status status = stream->LaunchKernel(kernel, in, out, nullptr);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  void Verify(benchmark::State& state) {
    if (buffer[kTasks] != static_cast<float>(kTasks)) state.SkipWithError("wrong result");
  }
};

void SetCounters(benchmark::State& state) {
  state.counters["per_task"] = benchmark::Counter(
      kTasks, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Replay(benchmark::State& state) {
  Setup setup;
  Check(BeginCapture(setup.stream.get(), CaptureMode::kGlobal));
  Check(setup.EnqueueAll());
  auto ri = EndCapture(setup.stream.get());
  Check(ri.status());
  for (auto _ : state) {
    Check(ExecuteAsync(**ri, setup.stream.get()));
    Check(setup.stream->Synchronize());
  }
  setup.Verify(state);
  SetCounters(state);
}
BENCHMARK(BM_Replay)->UseRealTime();

void BM_Eager(benchmark::State& state) {
  Setup setup;
  for (auto _ : state) {
    Check(setup.EnqueueAll());
    Check(setup.stream->Synchronize());
  }
  setup.Verify(state);
  SetCounters(state);
}
BENCHMARK(BM_Eager)->UseRealTime();

// The floor: the same 1,000 Run calls made directly on this thread.
void BM_DirectRun(benchmark::State& state) {
  Setup setup;
  for (auto _ : state) {
    for (int i = 0; i < kTasks; ++i) {
      const void* in[] = {setup.buffer + i};
      void* out[] = {setup.buffer + i + 1};
      KernelArgs args{in, out, nullptr};
      Check(setup.kernel.Run(args));
    }
    benchmark::ClobberMemory();
  }
  setup.Verify(state);
  SetCounters(state);
}
BENCHMARK(BM_DirectRun)->UseRealTime();

}  // namespace
}  // namespace reprise::runtime

BENCHMARK_MAIN();
