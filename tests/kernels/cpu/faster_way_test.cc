// FasterWay, FasterOf and the clearing wrapper's choice among a FasterOf kernel's two kernels
// (faster_way.h, output_clearing.h).
#include "kernels/cpu/faster_way.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/output_clearing.h"

namespace reprise::kernels::cpu {
namespace {

using ::testing::HasSubstr;

// Takes `count` turns, recording ns_of(way) for each, and returns the ways taken.
template <typename NsOf>
std::vector<int> Take(const FasterWay& chooser, int count, NsOf ns_of) {
  std::vector<int> ways;
  for (int i = 0; i < count; ++i) {
    const FasterWay::Turn turn = chooser.Next();
    chooser.Record(turn, ns_of(turn.way));
    ways.push_back(turn.way);
  }
  return ways;
}

TEST(FasterWayTest, UntimedRunsThenEachWayInTurnThenTheFastest) {
  const FasterWay chooser(/*ways=*/3, /*untimed_runs=*/2, /*seed_runs=*/2, /*trial_phase=*/64 + 10);
  EXPECT_EQ(chooser.ways(), 3);
  EXPECT_EQ(chooser.settling_runs(), 8u);  // 2 untimed runs, 2 of each way
  // Untimed runs, whose times must not count (way 0 looks fastest there).
  EXPECT_THAT(Take(chooser, 2, [](int way) { return way == 0 ? 1 : 1000000; }),
              ::testing::ElementsAre(0, 1));
  EXPECT_EQ(chooser.settling_runs(), 6u);
  // Each way in turn, twice; each way's fastest run counts: 300, 100 (of 500 and 100), 200.
  int seed = 0;
  const int64_t seeds[] = {300, 500, 200, 300, 100, 200};
  EXPECT_THAT(Take(chooser, 6, [&](int) { return seeds[seed++]; }),
              ::testing::ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_EQ(chooser.settling_runs(), 0u);
  // Then way 1, but on run 10 of each 64 another way in turn: 2, then 0.
  const std::vector<int> ways =
      Take(chooser, 140 - 8, [](int way) { return way == 1 ? 100 : 400; });
  for (size_t i = 0; i < ways.size(); ++i) {
    const size_t call = i + 8;
    const int want = call == 10 ? 2 : call == 74 ? 0 : call == 138 ? 2 : 1;
    EXPECT_EQ(ways[i], want) << "call " << call;
  }
}

TEST(FasterWayTest, FollowsAChange) {
  const FasterWay chooser(/*ways=*/2, /*untimed_runs=*/1, /*seed_runs=*/2, /*trial_phase=*/63);
  Take(chooser, 5, [](int way) { return way == 0 ? 100 : 200; });
  EXPECT_THAT(Take(chooser, 3, [](int way) { return way == 0 ? 100 : 200; }), ::testing::Each(0));
  // Way 0 becomes five times slower: a few runs move its average past way 1's.
  const std::vector<int> ways = Take(chooser, 20, [](int way) { return way == 0 ? 1000 : 200; });
  EXPECT_EQ(ways.front(), 0);
  EXPECT_EQ(ways.back(), 1);
  EXPECT_LE(std::count(ways.begin(), ways.end(), 0), 4);
}

// A run slowed many times over (another process, the other core's work) moves its way's
// average by at most a quarter of the average: the faster way stays chosen.
TEST(FasterWayTest, OneSlowRunDoesNotOutweighTheOtherWays) {
  const FasterWay chooser(/*ways=*/2, /*untimed_runs=*/1, /*seed_runs=*/2, /*trial_phase=*/63);
  Take(chooser, 5, [](int way) { return way == 0 ? 100 : 150; });
  EXPECT_THAT(Take(chooser, 1, [](int) { return 10000; }), ::testing::ElementsAre(0));
  EXPECT_THAT(Take(chooser, 10, [](int way) { return way == 0 ? 100 : 150; }), ::testing::Each(0));
}

// One float output: notes whether it was all zeros when the run started, sleeps `cleared_ms`
// or `otherwise_ms` accordingly, and fills the output with `value`.
class SleepingKernel final : public runtime::PreparedKernel {
 public:
  SleepingKernel(std::string name, size_t floats, int cleared_ms, int otherwise_ms, float value,
                 size_t workspace = 0, size_t storage = 0)
      : name_(std::move(name)),
        outputs_{runtime::TensorDesc{
            runtime::DataType::kFloat32, {static_cast<int64_t>(floats)}, nullptr}},
        floats_(floats),
        cleared_ms_(cleared_ms),
        otherwise_ms_(otherwise_ms),
        value_(value),
        workspace_(workspace),
        storage_(storage) {}

  absl::string_view op() const override { return name_; }
  const std::vector<runtime::TensorDesc>& outputs() const override { return outputs_; }
  size_t workspace_bytes() const override { return workspace_; }
  size_t output_storage_bytes(size_t) const override { return storage_; }
  int in_place_input() const override { return in_place_; }
  std::string implementation() const override { return name_ + " impl"; }
  absl::Status Run(const runtime::KernelArgs& args) const override {
    float* y = static_cast<float*>(args.outputs[0]);
    bool cleared = true;
    for (size_t i = 0; i < floats_; ++i) cleared = cleared && y[i] == 0.0f;
    runs.push_back(cleared);
    std::this_thread::sleep_for(std::chrono::milliseconds(cleared ? cleared_ms_ : otherwise_ms_));
    for (size_t i = 0; i < floats_; ++i) y[i] = value_;
    return absl::OkStatus();
  }

  mutable std::vector<bool> runs;  // per run: whether the output was cleared
  int in_place_ = -1;

 private:
  std::string name_;
  std::vector<runtime::TensorDesc> outputs_;
  size_t floats_;
  int cleared_ms_, otherwise_ms_;
  float value_;
  size_t workspace_, storage_;
};

struct Output {
  explicit Output(size_t floats) : y(floats, 7.0f) {}
  runtime::KernelArgs Args() {
    out[0] = y.data();
    return runtime::KernelArgs{nullptr, out, nullptr};
  }
  std::vector<float> y;
  void* out[1] = {nullptr};
};

TEST(FasterOfTest, RunsTheFasterOfTwoKernels) {
  constexpr size_t kFloats = 256;
  auto slow = std::make_unique<SleepingKernel>("Slow", kFloats, 20, 20, 1.0f, 100, 2048);
  auto fast = std::make_unique<SleepingKernel>("Fast", kFloats, 0, 0, 2.0f, 300, 1024);
  const SleepingKernel* slow_runs = slow.get();
  const SleepingKernel* fast_runs = fast.get();
  auto kernel = FasterOf(std::move(slow), std::move(fast), /*trial_phase=*/40);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->op(), "Slow");
  EXPECT_EQ((*kernel)->workspace_bytes(), 300u);
  EXPECT_EQ((*kernel)->output_storage_bytes(0), 2048u);
  EXPECT_THAT((*kernel)->implementation(), HasSubstr("[Slow impl] and [Fast impl]"));
  Output out(kFloats);
  // Two untimed runs and two timed ones each way: three runs each.
  EXPECT_EQ((*kernel)->settling_runs(), 6u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*kernel)->Run(out.Args()).ok());
  EXPECT_EQ((*kernel)->settling_runs(), 1u);
  ASSERT_TRUE((*kernel)->Run(out.Args()).ok());
  EXPECT_EQ((*kernel)->settling_runs(), 0u);
  EXPECT_EQ(slow_runs->runs.size(), 3u);
  EXPECT_EQ(fast_runs->runs.size(), 3u);
  // Then the fast one, but for the trial on run 40.
  for (int i = 6; i < 60; ++i) ASSERT_TRUE((*kernel)->Run(out.Args()).ok());
  EXPECT_EQ(slow_runs->runs.size(), 4u);
  EXPECT_EQ(out.y[0], 2.0f);
}

// A FasterOf kernel may write its output over an input only where both of its kernels may
// (over the same one); the clearing wrapper says what the kernel it wraps says.
TEST(FasterOfTest, WritesOverAnInputOnlyWhereBothKernelsDo) {
  for (const int second_in_place : {0, 1, -1}) {
    auto a = std::make_unique<SleepingKernel>("A", 16, 0, 0, 1.0f);
    auto b = std::make_unique<SleepingKernel>("B", 16, 0, 0, 2.0f);
    a->in_place_ = 0;
    b->in_place_ = second_in_place;
    auto kernel = FasterOf(std::move(a), std::move(b), 0);
    ASSERT_TRUE(kernel.ok());
    EXPECT_EQ((*kernel)->in_place_input(), second_in_place == 0 ? 0 : -1);
    auto cleared = ClearingOutputsFirst(**kernel, {64}, 0, 2, OutputClearing::kAuto, 0);
    EXPECT_EQ(cleared->in_place_input(), (*kernel)->in_place_input());
  }
}

TEST(FasterOfTest, RefusesKernelsWithDifferentOutputs) {
  auto a = std::make_unique<SleepingKernel>("A", 16, 0, 0, 1.0f);
  auto b = std::make_unique<SleepingKernel>("B", 32, 0, 0, 1.0f);
  auto kernel = FasterOf(std::move(a), std::move(b), 0);
  ASSERT_FALSE(kernel.ok());
  EXPECT_THAT(kernel.status().message(), HasSubstr("different outputs"));
  EXPECT_FALSE(FasterOf(nullptr, nullptr, 0).ok());
  SleepingKernel plain("Plain", 16, 0, 0, 1.0f);
  EXPECT_EQ(FasterOfWays(plain)[0], nullptr);
}

// Whether clearing pays and which kernel is faster depend on each other: here the second kernel
// is the fastest of all when its output was cleared first and the slowest when not. The clearing
// wrapper chooses among the four ways at once and keeps "second, cleared first".
TEST(FasterOfTest, ClearingChoosesTheKernelAndTheClearingTogether) {
  constexpr size_t kFloats = 4096;
  auto first = std::make_unique<SleepingKernel>("First", kFloats, 30, 30, 1.0f);
  auto second = std::make_unique<SleepingKernel>("Second", kFloats, 0, 60, 2.0f);
  const SleepingKernel* first_runs = first.get();
  const SleepingKernel* second_runs = second.get();
  auto faster_of = FasterOf(std::move(first), std::move(second), 0);
  ASSERT_TRUE(faster_of.ok());
  auto kernel = ClearingOutputsFirst(**faster_of, {kFloats * 4}, 0, 2, OutputClearing::kAuto,
                                     /*trial_phase=*/50);
  Output out(kFloats);
  // An untimed run of each kernel, then each of the four ways once: first, second, first
  // cleared, second cleared. The wrapper runs the two kernels itself: its choice is all that
  // settles (the FasterOf kernel's own is never made).
  EXPECT_EQ(kernel->settling_runs(), 6u);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(kernel->Run(out.Args()).ok());
  EXPECT_EQ(kernel->settling_runs(), 0u);
  EXPECT_EQ((*faster_of)->settling_runs(), 6u);
  EXPECT_THAT(first_runs->runs, ::testing::ElementsAre(false, false, true));
  EXPECT_THAT(second_runs->runs, ::testing::ElementsAre(false, false, true));
  for (int i = 6; i < 40; ++i) ASSERT_TRUE(kernel->Run(out.Args()).ok());
  EXPECT_EQ(first_runs->runs.size(), 3u);
  ASSERT_EQ(second_runs->runs.size(), 3u + 34u);
  EXPECT_THAT(std::vector<bool>(second_runs->runs.begin() + 3, second_runs->runs.end()),
              ::testing::Each(true));
}

// Clearing first before one of a FasterOf kernel's two zeros that kernel's part of the
// workspace, not the other's larger one (clearing more costs later steps their cached data).
TEST(FasterOfTest, ClearingZerosTheWorkspaceOfTheKernelThatRuns) {
  constexpr size_t kFloats = 64;
  constexpr size_t kSmall = kClearOutputMinBytes, kLarge = 2 * kClearOutputMinBytes;
  auto first = std::make_unique<SleepingKernel>("First", kFloats, 0, 0, 1.0f, kSmall);
  auto second = std::make_unique<SleepingKernel>("Second", kFloats, 0, 0, 2.0f, kLarge);
  auto faster_of = FasterOf(std::move(first), std::move(second), 0);
  ASSERT_TRUE(faster_of.ok());
  ASSERT_EQ((*faster_of)->workspace_bytes(), kLarge);
  auto kernel = ClearingOutputsFirst(**faster_of, {0}, kLarge, 2, OutputClearing::kAuto,
                                     /*trial_phase=*/50);
  Output out(kFloats);
  std::vector<char> workspace(kLarge, 7);
  runtime::KernelArgs args = out.Args();
  args.workspace = workspace.data();
  // Untimed runs of each, then first, second: nothing cleared.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(kernel->Run(args).ok());
  EXPECT_EQ(std::count(workspace.begin(), workspace.end(), 0), 0);
  // First, cleared first: its part only.
  ASSERT_TRUE(kernel->Run(args).ok());
  EXPECT_EQ(std::count(workspace.begin(), workspace.begin() + kSmall, 0),
            static_cast<std::ptrdiff_t>(kSmall));
  EXPECT_EQ(std::count(workspace.begin() + kSmall, workspace.end(), 7),
            static_cast<std::ptrdiff_t>(kLarge - kSmall));
  // Second, cleared first: all of it.
  ASSERT_TRUE(kernel->Run(args).ok());
  EXPECT_EQ(std::count(workspace.begin(), workspace.end(), 0), static_cast<std::ptrdiff_t>(kLarge));
}

}  // namespace
}  // namespace reprise::kernels::cpu
