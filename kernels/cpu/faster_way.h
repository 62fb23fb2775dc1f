// Choosing among ways of running a step (two kernels, clearing first or not) by timing them as
// the step runs.
//
// Some choices depend on the machine more than on the model: whether clearing a step's buffers
// first pays (output_clearing.h), or whether oneDNN's fused 1x1 + depthwise convolution beats
// the two convolutions apart (at two threads the fused one was faster for MobileNetV2 and
// slower for EfficientNet, conv_dw.cc). FasterWay times a step's runs each way and keeps the
// faster; FasterOf makes a kernel of two interchangeable kernels that way.
#ifndef REPRISE_KERNELS_CPU_FASTER_WAY_H_
#define REPRISE_KERNELS_CPU_FASTER_WAY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"

namespace reprise::kernels::cpu {

/// Which of `ways` ways (0 to ways - 1, at most kMaxWays) a step's next run takes, from the
/// times of its earlier runs: `untimed_runs` runs first, untimed, ways 0, 1, ... in turn (first
/// touch, oneDNN's lazy set-up); then `seed_runs` runs of each way in turn, whose fastest seeds
/// each way's time (few: a benchmark of a large model may time ten runs in all; a run another
/// process slowed says little); then the fastest way by moving averages of the timed runs (a run
/// counts at most twice its way's average, so that one slowed run cannot outweigh), and
/// another way (each in turn) once every kTrialPeriod runs to follow a change, on the runs whose
/// number modulo kTrialPeriod is trial_phase modulo kTrialPeriod (steps given different phases
/// try on different runs, so that no one run pays for every step's trial). Thread-safe:
/// concurrent runs share the averages.
class FasterWay {
 public:
  static constexpr int kMaxWays = 4;
  static constexpr uint64_t kTrialPeriod = 64;

  struct Turn {
    uint64_t call = 0;
    int way = 0;
  };

  FasterWay(int ways, uint64_t untimed_runs, uint64_t seed_runs, uint64_t trial_phase);

  int ways() const { return ways_; }
  /// The way the next run takes.
  Turn Next() const;
  /// Records that `turn`'s run took `ns` (untimed turns are not recorded).
  void Record(const Turn& turn, int64_t ns) const;
  /// Runs still to come before the seeding runs are over (PreparedKernel::settling_runs).
  uint64_t settling_runs() const;

 private:
  const int ways_;
  const uint64_t untimed_runs_;
  const uint64_t seeding_end_;  // the first run after the seeding runs
  const uint64_t trial_phase_;
  mutable std::atomic<uint64_t> calls_{0};
  // Per way: the fastest seeding run, then a moving average of the timed runs; 0 until the first.
  mutable std::atomic<int64_t> average_ns_[kMaxWays] = {};
};

/// A trial phase for a FasterWay that nothing gives one to: successive calls return successive
/// values, so that kernels prepared one after another try their other ways on different runs.
uint64_t NextTrialPhase();

/// A kernel that runs `first` or `second` (which must have the same outputs: count, types and
/// shapes), whichever FasterWay(2, 2, 2, trial_phase) finds faster (ClearingOutputsFirst
/// chooses among the two and whether to clear at once: FasterOfWays). Its workspace and output
/// storage are the larger of the two; op() is first's; implementation() names both. The two may
/// round differently: a step's results can differ in the last bits between runs that took different
/// ways.
absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> FasterOf(
    std::unique_ptr<runtime::PreparedKernel> first, std::unique_ptr<runtime::PreparedKernel> second,
    uint64_t trial_phase);

/// The two kernels of a FasterOf kernel, else {nullptr, nullptr}.
std::array<const runtime::PreparedKernel*, 2> FasterOfWays(const runtime::PreparedKernel& kernel);

}  // namespace reprise::kernels::cpu

#endif  // REPRISE_KERNELS_CPU_FASTER_WAY_H_
