#include "runtime/engine/branch_plan.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/engine/execution_plan.h"

namespace reprise::runtime::engine {
namespace {

// Union-find over the steps of one scan (indices relative to its start).
class Components {
 public:
  int Add() {
    parent_.push_back(static_cast<int>(parent_.size()));
    return parent_.back();
  }
  int Find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void Join(int a, int b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<int> parent_;
};

// Packs component costs into `lanes` lanes, longest first onto the least loaded. Returns each
// component's lane and fills `loads`.
std::vector<int> Pack(const std::vector<int64_t>& costs, int lanes, std::vector<int64_t>* loads) {
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  loads->assign(static_cast<size_t>(lanes), 0);
  std::vector<int> lane_of(costs.size(), 0);
  for (size_t c : order) {
    const auto lightest = std::min_element(loads->begin(), loads->end());
    lane_of[c] = static_cast<int>(lightest - loads->begin());
    *lightest += costs[c];
  }
  return lane_of;
}

// The region that starts at `start`, if one pays.
std::optional<ParallelRegion> TryRegion(const std::vector<BranchStep>& steps, int start,
                                        const BranchOptions& options) {
  const int n = static_cast<int>(steps.size());
  const int limit = std::min(n, start + std::max(options.max_region_steps, 2));
  Components components;
  int end = start;
  for (; end < limit; ++end) {
    std::vector<int> roots;
    for (int dep : steps[end].deps) {
      if (dep < start || dep >= end) continue;
      const int root = components.Find(dep - start);
      if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
    }
    if (roots.size() >= 2) break;  // a join: the region ends before it
    const int self = components.Add();
    if (!roots.empty()) components.Join(self, roots[0]);
  }
  // Components of [start, end) and their costs.
  std::vector<int> component_of(static_cast<size_t>(end - start));
  std::vector<int> root_index(static_cast<size_t>(end - start), -1);
  std::vector<int64_t> costs;
  for (int s = start; s < end; ++s) {
    const int root = components.Find(s - start);
    if (root_index[root] < 0) {
      root_index[root] = static_cast<int>(costs.size());
      costs.push_back(0);
    }
    component_of[s - start] = root_index[root];
    costs[root_index[root]] += std::max<int64_t>(steps[s].cost_ns, 0);
  }
  int lanes = std::min<int>(options.max_lanes, static_cast<int>(costs.size()));
  std::vector<int64_t> loads;
  std::vector<int> lane_of;
  // A step's time on `threads` threads: its cost over 1 + e * (threads - 1), where what a thread
  // adds (e) grows with the step's size.
  auto on_threads = [&options](int64_t cost, int threads) {
    const double c = static_cast<double>(std::max<int64_t>(cost, 0));
    const double half = static_cast<double>(std::max<int64_t>(options.half_efficiency_cost_ns, 1));
    const double e = std::max(options.thread_efficiency, 0.0) * c / (c + half);
    return c / (1.0 + e * (std::max(threads, 1) - 1));
  };
  double one_stream = 0;
  for (int s = start; s < end; ++s) one_stream += on_threads(steps[s].cost_ns, options.threads);
  for (; lanes >= 2; --lanes) {
    lane_of = Pack(costs, lanes, &loads);
    if (*std::min_element(loads.begin(), loads.end()) < options.min_lane_cost_ns) continue;
    std::vector<double> lane_time(static_cast<size_t>(lanes), 0.0);
    for (int s = start; s < end; ++s) {
      lane_time[lane_of[component_of[s - start]]] +=
          on_threads(steps[s].cost_ns, options.threads / lanes);
    }
    if (*std::max_element(lane_time.begin(), lane_time.end()) < one_stream) break;
  }
  if (lanes < 2) return std::nullopt;
  // The heaviest lane stays on the origin stream.
  std::vector<int> rank(static_cast<size_t>(lanes));
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(), [&](int a, int b) { return loads[a] > loads[b]; });
  std::vector<int> position(static_cast<size_t>(lanes));
  for (int i = 0; i < lanes; ++i) position[rank[i]] = i;
  ParallelRegion region;
  region.first = start;
  region.end = end;
  region.lanes.resize(static_cast<size_t>(lanes));
  for (int s = start; s < end; ++s) {
    region.lanes[position[lane_of[component_of[s - start]]]].push_back(s);
  }
  return region;
}

int64_t Elements(const TensorDesc& desc) { return desc.present ? NumElements(desc.shape) : 0; }

}  // namespace

std::vector<ParallelRegion> PlanBranches(const std::vector<BranchStep>& steps,
                                         const BranchOptions& options) {
  std::vector<ParallelRegion> regions;
  const int n = static_cast<int>(steps.size());
  if (options.max_lanes <= 1 || n < 2) return regions;
  std::vector<int> readers(static_cast<size_t>(n), 0);
  for (int s = 0; s < n; ++s) {
    std::vector<int> deps = steps[s].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int dep : deps) {
      if (dep >= 0 && dep < s) ++readers[dep];
    }
  }
  int i = 0;
  while (i < n) {
    const bool fork_point = i == 0 || readers[i - 1] >= 2;
    std::optional<ParallelRegion> region;
    if (fork_point) region = TryRegion(steps, i, options);
    if (!region.has_value()) {
      ++i;
      continue;
    }
    i = region->end;
    regions.push_back(*std::move(region));
  }
  return regions;
}

int64_t EstimateStepCostNs(absl::string_view op, std::span<const TensorDesc> inputs,
                           const std::vector<TensorDesc>& outputs) {
  double bytes = 0;
  for (const TensorDesc& in : inputs) {
    bytes += static_cast<double>(Elements(in)) * static_cast<double>(DataTypeSize(in.dtype));
  }
  for (const TensorDesc& out : outputs) {
    bytes += static_cast<double>(Elements(out)) * static_cast<double>(DataTypeSize(out.dtype));
  }
  double flops = 0;
  const double out_elements = outputs.empty() ? 0.0 : static_cast<double>(Elements(outputs[0]));
  if (absl::StrContains(op, "Conv") && inputs.size() >= 2 && inputs[1].shape.size() >= 3) {
    // Weights [M, C/group, k...]: each output element takes C/group * k... multiply-adds
    // (ConvTranspose: each input element spreads over M/group * k... outputs).
    double per = 1;
    for (size_t d = 1; d < inputs[1].shape.size(); ++d) {
      per *= static_cast<double>(inputs[1].shape[d]);
    }
    const double base = absl::StrContains(op, "ConvTranspose")
                            ? static_cast<double>(Elements(inputs[0]))
                            : out_elements;
    flops = 2 * base * per;
  } else if ((absl::StrContains(op, "MatMul") || absl::StrContains(op, "Gemm")) &&
             !inputs.empty() && !inputs[0].shape.empty()) {
    flops = 2 * out_elements * static_cast<double>(inputs[0].shape.back());
  }
  // About 20 GFLOP/s and 5 GB/s on one core, plus the dispatch of a step.
  return 500 + static_cast<int64_t>(flops / 20 + bytes / 5);
}

absl::Status BranchStreams::Reserve(size_t helpers) {
  if (fork_ == nullptr) {
    ASSIGN_OR_RETURN(fork_, device_->CreateEvent(EventFlags::kNone));
  }
  while (helpers_.size() < helpers) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device_->CreateStream());
    ASSIGN_OR_RETURN(std::unique_ptr<Event> event, device_->CreateEvent(EventFlags::kNone));
    helpers_.push_back(std::move(stream));
    joins_.push_back(std::move(event));
  }
  return absl::OkStatus();
}

absl::Status EnqueueForked(const ExecutionPlan& plan, Stream* origin, BranchStreams* branches) {
  const std::vector<PlanStep>& steps = plan.steps();
  auto launch = [&steps](size_t s, Stream* stream) -> absl::Status {
    const PlanStep& step = steps[s];
    absl::Status status =
        step.control != nullptr
            ? absl::InternalError("a control-flow step cannot run on a forked branch")
            : stream->LaunchKernel(
                  *step.kernel,
                  std::span<const void* const>(step.inputs.data(), step.inputs.size()),
                  std::span<void* const>(step.outputs.data(), step.outputs.size()), step.workspace);
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat("node \"", step.node_name, "\" (", step.op,
                                                    "): ", status.message()));
  };
  size_t next = 0;
  for (const ParallelRegion& region : plan.parallel_regions()) {
    for (; next < static_cast<size_t>(region.first); ++next) RETURN_IF_ERROR(launch(next, origin));
    const size_t helpers = region.lanes.size() - 1;
    RETURN_IF_ERROR(branches->Reserve(helpers));
    RETURN_IF_ERROR(origin->RecordEvent(branches->fork()));
    for (size_t h = 0; h < helpers; ++h) {
      RETURN_IF_ERROR(branches->helper(h)->WaitEvent(branches->fork()));
    }
    for (size_t lane = 0; lane < region.lanes.size(); ++lane) {
      Stream* stream = lane == 0 ? origin : branches->helper(lane - 1);
      for (int s : region.lanes[lane]) RETURN_IF_ERROR(launch(static_cast<size_t>(s), stream));
    }
    for (size_t h = 0; h < helpers; ++h) {
      RETURN_IF_ERROR(branches->helper(h)->RecordEvent(branches->join(h)));
      RETURN_IF_ERROR(origin->WaitEvent(branches->join(h)));
    }
    next = static_cast<size_t>(region.end);
  }
  for (; next < steps.size(); ++next) RETURN_IF_ERROR(launch(next, origin));
  return absl::OkStatus();
}

}  // namespace reprise::runtime::engine
