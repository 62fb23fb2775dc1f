// StreamZeros and the kernel that clears a step's buffers before it runs (output_clearing.h).
#include "kernels/cpu/output_clearing.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::kernels::cpu {
namespace {

using ::testing::EndsWith;

TEST(StreamZerosTest, ZerosExactlyTheRangeAtAnyAlignmentAndThreadCount) {
  constexpr size_t kMargin = 96;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63},
                       size_t{4096 + 5}, (size_t{1} << 20) + 7, size_t{3} << 20}) {
    for (size_t offset : {size_t{0}, size_t{3}, size_t{16}, size_t{64 + 9}}) {
      for (int threads : {1, 2, 3}) {
        std::vector<uint8_t> buffer(bytes + 2 * kMargin, 0xAB);
        StreamZeros(buffer.data() + kMargin + offset, bytes, threads);
        size_t wrong = 0;
        for (size_t i = 0; i < buffer.size(); ++i) {
          const bool inside = i >= kMargin + offset && i < kMargin + offset + bytes;
          wrong += buffer[i] != (inside ? 0 : 0xAB);
        }
        EXPECT_EQ(wrong, 0u) << bytes << " bytes at offset " << offset << ", " << threads
                             << " threads";
      }
    }
  }
}

// One float output and a workspace. Run notes whether both were all zeros when it started,
// sleeps `slow_ms` when that is `slow_when_cleared` (cleared) or not, and fills both with ones.
class RecordingKernel final : public runtime::PreparedKernel {
 public:
  RecordingKernel(size_t floats, size_t workspace_bytes, bool slow_when_cleared, int slow_ms)
      : outputs_{runtime::TensorDesc{
            runtime::DataType::kFloat32, {static_cast<int64_t>(floats)}, nullptr}},
        floats_(floats),
        workspace_bytes_(workspace_bytes),
        slow_when_cleared_(slow_when_cleared),
        slow_ms_(slow_ms) {}

  absl::string_view op() const override { return "Recording"; }
  const std::vector<runtime::TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return workspace_bytes_; }
  size_t output_storage_bytes(size_t) const override { return 4 * floats_ + 64; }
  std::string implementation() const override { return "recording"; }
  absl::Status Run(const runtime::KernelArgs& args) const override {
    float* y = static_cast<float*>(args.outputs[0]);
    uint8_t* ws = static_cast<uint8_t*>(args.workspace);
    bool cleared = true;
    for (size_t i = 0; i < floats_; ++i) cleared = cleared && y[i] == 0.0f;
    for (size_t i = 0; i < workspace_bytes_; ++i) cleared = cleared && ws[i] == 0;
    cleared_runs.push_back(cleared);
    if (cleared == slow_when_cleared_ && slow_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms_));
    }
    for (size_t i = 0; i < floats_; ++i) y[i] = 1.0f;
    if (workspace_bytes_ > 0) std::memset(ws, 1, workspace_bytes_);
    return absl::OkStatus();
  }

  mutable std::vector<bool> cleared_runs;

 private:
  std::vector<runtime::TensorDesc> outputs_;
  size_t floats_, workspace_bytes_;
  bool slow_when_cleared_;
  int slow_ms_;
};

struct Buffers {
  explicit Buffers(size_t floats, size_t workspace) : y(floats, 7.0f), ws(workspace, 7) {}
  runtime::KernelArgs Args() {
    out[0] = y.data();
    return runtime::KernelArgs{nullptr, out, ws.data()};
  }
  std::vector<float> y;
  std::vector<uint8_t> ws;
  void* out[1] = {nullptr};
};

TEST(ClearingKernelTest, OnClearsTheOutputAndWorkspaceBeforeEveryRun) {
  constexpr size_t kFloats = 70000, kWorkspace = 5000;
  RecordingKernel inner(kFloats, kWorkspace, false, 0);
  auto kernel = ClearingOutputsFirst(inner, {kFloats * 4}, kWorkspace, 2, OutputClearing::kOn);
  EXPECT_EQ(kernel->op(), "Recording");
  EXPECT_EQ(&kernel->outputs(), &inner.outputs());
  EXPECT_EQ(kernel->workspace_bytes(), kWorkspace);
  EXPECT_EQ(kernel->output_storage_bytes(0), kFloats * 4 + 64);
  EXPECT_THAT(kernel->implementation(), EndsWith("recording (buffers cleared first)"));
  Buffers b(kFloats, kWorkspace);
  for (int run = 0; run < 3; ++run) ASSERT_TRUE(kernel->Run(b.Args()).ok());
  EXPECT_THAT(inner.cleared_runs, ::testing::ElementsAre(true, true, true));
  EXPECT_EQ(b.y[kFloats - 1], 1.0f);  // the kernel's own result stays
}

TEST(ClearingKernelTest, ClearsOnlyTheBuffersItIsGiven) {
  constexpr size_t kFloats = 1000, kWorkspace = 64;
  RecordingKernel idle(0, 0, false, 0);  // writes nothing
  // The output's first half only, and not the workspace.
  auto kernel = ClearingOutputsFirst(idle, {kFloats * 2}, 0, 1, OutputClearing::kOn);
  Buffers b(kFloats, kWorkspace);
  ASSERT_TRUE(kernel->Run(b.Args()).ok());
  EXPECT_EQ(b.y[0], 0.0f);
  EXPECT_EQ(b.y[kFloats / 2 - 1], 0.0f);
  EXPECT_EQ(b.y[kFloats / 2], 7.0f);
  EXPECT_EQ(b.ws[0], 7);
}

// Runs `kernel` `n` times on `b` and counts the runs whose buffers were cleared.
int ClearedRuns(const RecordingKernel& inner, const runtime::PreparedKernel& kernel, Buffers& b,
                int n) {
  const size_t before = inner.cleared_runs.size();
  for (int i = 0; i < n; ++i) EXPECT_TRUE(kernel.Run(b.Args()).ok());
  int cleared = 0;
  for (size_t i = before; i < inner.cleared_runs.size(); ++i) cleared += inner.cleared_runs[i];
  return cleared;
}

TEST(ClearingKernelTest, AutoClearsWhereThatIsFaster) {
  constexpr size_t kFloats = 4096;
  // Slow (20 ms) when the output was not cleared: after the untimed run and the measured ones,
  // auto clears every run but the one in 64 that tries the other way.
  RecordingKernel inner(kFloats, 0, /*slow_when_cleared=*/false, 20);
  auto kernel = ClearingOutputsFirst(inner, {kFloats * 4}, 0, 2, OutputClearing::kAuto);
  EXPECT_THAT(kernel->implementation(), EndsWith("(buffers cleared first where faster)"));
  Buffers b(kFloats, 0);
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 1), 0);  // untimed, as it is
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 4), 2);  // each way in turn
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 60), 59);
  // The one run that tried the other way: run 64 (trial phase 0).
  ASSERT_EQ(inner.cleared_runs.size(), 65u);
  EXPECT_FALSE(inner.cleared_runs[64]);
}

TEST(ClearingKernelTest, StepsTryTheOtherWayOnDifferentRuns) {
  constexpr size_t kFloats = 4096;
  RecordingKernel inner(kFloats, 0, /*slow_when_cleared=*/false, 20);
  auto kernel = ClearingOutputsFirst(inner, {kFloats * 4}, 0, 2, OutputClearing::kAuto,
                                     /*trial_phase=*/64 + 30);
  Buffers b(kFloats, 0);
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 5), 2);
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 60), 59);
  ASSERT_EQ(inner.cleared_runs.size(), 65u);
  EXPECT_FALSE(inner.cleared_runs[30]);
  EXPECT_TRUE(inner.cleared_runs[64]);
}

TEST(ClearingKernelTest, AutoLeavesTheBuffersWhereClearingIsSlower) {
  constexpr size_t kFloats = 4096;
  RecordingKernel inner(kFloats, 0, /*slow_when_cleared=*/true, 20);
  auto kernel = ClearingOutputsFirst(inner, {kFloats * 4}, 0, 2, OutputClearing::kAuto);
  Buffers b(kFloats, 0);
  EXPECT_EQ(ClearedRuns(inner, *kernel, b, 5), 2);
  EXPECT_LE(ClearedRuns(inner, *kernel, b, 60), 1);
}

TEST(OutputClearingTest, NamesAndParses) {
  EXPECT_EQ(OutputClearingName(OutputClearing::kAuto), "auto");
  EXPECT_EQ(OutputClearingName(OutputClearing::kOn), "on");
  EXPECT_EQ(OutputClearingName(OutputClearing::kOff), "off");
  EXPECT_EQ(*ParseOutputClearing("on"), OutputClearing::kOn);
  EXPECT_EQ(*ParseOutputClearing("off"), OutputClearing::kOff);
  EXPECT_EQ(*ParseOutputClearing("auto"), OutputClearing::kAuto);
  EXPECT_FALSE(ParseOutputClearing("yes").ok());
}

}  // namespace
}  // namespace reprise::kernels::cpu
