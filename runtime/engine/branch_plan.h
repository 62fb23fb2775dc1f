// Inter-op parallelism: which steps of a plan may run on parallel streams (independent branches
// such as an Inception block's), chosen from the steps' dependencies and estimated costs, and
// how a capture forks them onto helper streams and joins them back with events.
#ifndef REPRISE_RUNTIME_ENGINE_BRANCH_PLAN_H_
#define REPRISE_RUNTIME_ENGINE_BRANCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"
#include "runtime/core/event.h"
#include "runtime/core/kernel.h"
#include "runtime/core/stream.h"

namespace reprise::runtime::engine {

class ExecutionPlan;

/// A lane must carry at least this much estimated work (ns) for a fork to pay: waking a helper
/// stream's worker and joining it back costs tens of microseconds.
inline constexpr int64_t kDefaultMinBranchCostNs = 40'000;
/// The most streams a plan forks onto, whatever the threads.
inline constexpr int kMaxBranchStreams = 4;

/// One step as the branch planner sees it: its estimated cost and the earlier steps whose
/// outputs it reads (indices below its own).
struct BranchStep {
  int64_t cost_ns = 0;
  std::vector<int> deps;
};

/// Steps [first, end) of a plan split into lanes that run at the same time: lane 0 on the
/// capturing (origin) stream, lane k on helper stream k-1. A lane's steps (plan indices, in plan
/// order) depend only on steps before `first` or on earlier steps of the same lane; steps after
/// `end` run after every lane has joined the origin.
struct ParallelRegion {
  int first = 0;
  int end = 0;
  std::vector<std::vector<int>> lanes;
};

/// What each thread past the first adds to a step's speed, as a share of the first's, at most:
/// a step of estimated cost c runs 1 + e * (threads - 1) times faster on `threads` threads,
/// with e = kDefaultThreadEfficiency * c / (c + kDefaultHalfEfficiencyCostNs). A compromise
/// between two models measured at batch 1 on two cores, one thread against two, steps grouped
/// by estimate (which runs about ten times the measured time for convolutions): Inception v3's
/// steps of 1 to 3 ms of estimate gained 1.45x from the second thread, 3 to 10 ms 1.7x, larger
/// ones 2.2x; GoogLeNet's, with fewer channels, 1.1x to 1.3x up to 15 ms. The model gives
/// 1.18x at 1 ms, 1.39x at 3 ms, 1.64x at 10 ms, 1.79x at 30 ms. Steps under 1 ms got slower on
/// two threads, which it does not follow.
inline constexpr double kDefaultThreadEfficiency = 0.9;
inline constexpr int64_t kDefaultHalfEfficiencyCostNs = 4'000'000;

struct BranchOptions {
  int max_lanes = 1;  // 1: never fork
  int64_t min_lane_cost_ns = kDefaultMinBranchCostNs;
  int max_region_steps = 512;  // bounds the scan from each fork point
  /// The stream's intra-op threads: unforked, every step uses them all; forked onto N lanes,
  /// each lane's steps use threads / N (at least 1).
  int threads = 1;
  double thread_efficiency = kDefaultThreadEfficiency;
  int64_t half_efficiency_cost_ns = kDefaultHalfEfficiencyCostNs;
};

/// Finds regions of independent branches: from each fork point (the plan's start, or a step
/// whose outputs more than one later step reads) it scans forward, grouping the steps into
/// connected components of their dependencies, until a step joins two components (the join
/// closes the region) or the scan ends. The components are packed into at most `max_lanes`
/// lanes, longest first onto the least loaded; lanes are dropped while the lightest carries
/// less than `min_lane_cost_ns` or while the forked region would not be faster than the same
/// steps one after another on all the threads: the slowest lane, its steps on its share of the
/// threads, must take less than the whole region on all of them. Small steps, which gain little
/// from more threads, fork even when their lanes are unbalanced; large ones only when their lanes
/// are close to even. Regions never overlap and come in plan order.
std::vector<ParallelRegion> PlanBranches(const std::vector<BranchStep>& steps,
                                         const BranchOptions& options);

/// A rough time estimate (ns, one thread) of a step: multiply-adds of convolutions and matrix
/// products, bytes moved for everything else, and a fixed per-step overhead.
int64_t EstimateStepCostNs(absl::string_view op, std::span<const TensorDesc> inputs,
                           const std::vector<TensorDesc>& outputs);

/// The helper streams and events a capture forks branches onto; made on first use and reused
/// by every capture (a captured instance keeps its own copies of the fork/join points and runs
/// its forked lanes on the launching thread's OpenMP team, so these are needed only while
/// capturing). Not
/// thread-safe; owned by whoever captures (a stream session); `device` must outlive it.
class BranchStreams {
 public:
  explicit BranchStreams(Device* device) : device_(device) {}
  /// Makes sure `helpers` helper streams (and their join events) exist.
  absl::Status Reserve(size_t helpers);
  Stream* helper(size_t i) const { return helpers_[i].get(); }
  Event* join(size_t i) const { return joins_[i].get(); }
  Event* fork() const { return fork_.get(); }

 private:
  Device* device_;
  std::vector<std::unique_ptr<Stream>> helpers_;
  std::vector<std::unique_ptr<Event>> joins_;
  std::unique_ptr<Event> fork_;
};

/// Enqueues `plan`'s steps on the capturing stream `origin`, each parallel region forked: the
/// origin records the fork event, each helper waits on it, runs its lane, records its join
/// event, and the origin waits on every join before the region's next step. Errors name the
/// node; a plan with regions holds no control-flow step.
absl::Status EnqueueForked(const ExecutionPlan& plan, Stream* origin, BranchStreams* branches);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_BRANCH_PLAN_H_
