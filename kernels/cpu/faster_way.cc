#include "kernels/cpu/faster_way.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/steady_clock.h"

namespace reprise::kernels::cpu {
namespace {

class FasterOfKernel final : public runtime::PreparedKernel {
 public:
  FasterOfKernel(std::unique_ptr<runtime::PreparedKernel> first,
                 std::unique_ptr<runtime::PreparedKernel> second, uint64_t trial_phase)
      : ways_{std::move(first), std::move(second)},
        chooser_(/*ways=*/2, /*untimed_runs=*/2, /*seed_runs=*/2, trial_phase) {}

  absl::string_view op() const override { return ways_[0]->op(); }
  const std::vector<runtime::TensorDesc>& outputs() const override { return ways_[0]->outputs(); }
  size_t workspace_bytes() const override {
    return std::max(ways_[0]->workspace_bytes(), ways_[1]->workspace_bytes());
  }
  size_t output_storage_bytes(size_t i) const override {
    return std::max(ways_[0]->output_storage_bytes(i), ways_[1]->output_storage_bytes(i));
  }
  std::string implementation() const override {
    return absl::StrCat("the faster by timed runs of [", ways_[0]->implementation(), "] and [",
                        ways_[1]->implementation(), "]");
  }

  int in_place_input() const override {
    const int a = ways_[0]->in_place_input();
    return a == ways_[1]->in_place_input() ? a : -1;
  }
  std::vector<size_t> input_offsets_in_output() const override {
    std::vector<size_t> a = ways_[0]->input_offsets_in_output();
    return a == ways_[1]->input_offsets_in_output() ? a : std::vector<size_t>{};
  }

  const runtime::PreparedKernel* way(int i) const { return ways_[i].get(); }
  // The ways' own choices are not counted: a way runs only when it is chosen.
  uint64_t settling_runs() const override { return chooser_.settling_runs(); }

  absl::Status Run(const runtime::KernelArgs& args) const override {
    const FasterWay::Turn turn = chooser_.Next();
    const int64_t start = SteadyNowNs();
    absl::Status status = ways_[turn.way]->Run(args);
    chooser_.Record(turn, SteadyNowNs() - start);
    return status;
  }

 private:
  const std::unique_ptr<runtime::PreparedKernel> ways_[2];
  const FasterWay chooser_;
};

std::atomic<uint64_t> next_trial_phase{0};

}  // namespace

FasterWay::FasterWay(int ways, uint64_t untimed_runs, uint64_t seed_runs, uint64_t trial_phase)
    : ways_(std::clamp(ways, 1, kMaxWays)),
      untimed_runs_(untimed_runs),
      seeding_end_(untimed_runs + seed_runs * static_cast<uint64_t>(ways_)),
      trial_phase_(trial_phase % kTrialPeriod) {}

FasterWay::Turn FasterWay::Next() const {
  Turn turn;
  turn.call = calls_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t ways = static_cast<uint64_t>(ways_);
  if (turn.call < untimed_runs_) {
    turn.way = static_cast<int>(turn.call % ways);
    return turn;
  }
  if (turn.call < seeding_end_) {
    turn.way = static_cast<int>((turn.call - untimed_runs_) % ways);
    return turn;
  }
  int fastest = 0;
  int64_t best = average_ns_[0].load(std::memory_order_relaxed);
  for (int way = 1; way < ways_; ++way) {
    const int64_t ns = average_ns_[way].load(std::memory_order_relaxed);
    if (ns < best) {
      fastest = way;
      best = ns;
    }
  }
  turn.way = fastest;
  if (ways_ > 1 && turn.call % kTrialPeriod == trial_phase_) {
    // Trial n tries the n-th other way, in turn.
    const uint64_t trial = turn.call / kTrialPeriod;
    turn.way = static_cast<int>((static_cast<uint64_t>(fastest) + 1 + trial % (ways - 1)) % ways);
  }
  return turn;
}

uint64_t FasterWay::settling_runs() const {
  const uint64_t calls = calls_.load(std::memory_order_relaxed);
  return calls < seeding_end_ ? seeding_end_ - calls : 0;
}

void FasterWay::Record(const Turn& turn, int64_t ns) const {
  if (turn.call < untimed_runs_ || turn.way < 0 || turn.way >= ways_) return;
  std::atomic<int64_t>& average = average_ns_[turn.way];
  const int64_t old = average.load(std::memory_order_relaxed);
  const bool seeding = turn.call < seeding_end_;
  // A run counts at most twice the average: one run that another process or the other core's
  // work slowed many times over moves the average by a quarter, not past the other ways'
  // (the steps of MobileNetV2 at batch 1 on two threads took 0.3 to 1.1 ms from run to run).
  const int64_t next = old == 0  ? ns
                       : seeding ? std::min(old, ns)
                                 : old + (std::min(ns, 2 * old) - old) / 4;
  average.store(next, std::memory_order_relaxed);
}

uint64_t NextTrialPhase() { return next_trial_phase.fetch_add(1, std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<runtime::PreparedKernel>> FasterOf(
    std::unique_ptr<runtime::PreparedKernel> first, std::unique_ptr<runtime::PreparedKernel> second,
    uint64_t trial_phase) {
  if (first == nullptr || second == nullptr) {
    return absl::InvalidArgumentError("FasterOf needs two kernels");
  }
  const std::vector<runtime::TensorDesc>& a = first->outputs();
  const std::vector<runtime::TensorDesc>& b = second->outputs();
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) {
    same = a[i].dtype == b[i].dtype && a[i].shape == b[i].shape;
  }
  if (!same) {
    return absl::InvalidArgumentError(absl::StrCat("FasterOf: [", first->implementation(),
                                                   "] and [", second->implementation(),
                                                   "] have different outputs"));
  }
  return std::make_unique<FasterOfKernel>(std::move(first), std::move(second), trial_phase);
}

std::array<const runtime::PreparedKernel*, 2> FasterOfWays(const runtime::PreparedKernel& kernel) {
  const auto* faster_of = dynamic_cast<const FasterOfKernel*>(&kernel);
  if (faster_of == nullptr) return {nullptr, nullptr};
  return {faster_of->way(0), faster_of->way(1)};
}

}  // namespace reprise::kernels::cpu
