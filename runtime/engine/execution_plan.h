// A model prepared for one set of input shapes: a flat array of steps over fixed buffers.
#ifndef REPRISE_RUNTIME_ENGINE_EXECUTION_PLAN_H_
#define REPRISE_RUNTIME_ENGINE_EXECUTION_PLAN_H_

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/kernel.h"
#include "runtime/engine/aligned_buffer.h"
#include "runtime/engine/branch_plan.h"
#include "runtime/engine/graph.h"
#include "runtime/engine/validated_inputs.h"

namespace reprise::runtime::engine {

/// A host tensor with its graph name (an input or an output of a model).
struct NamedTensor {
  std::string name;
  TensorValue value;
};

/// Iterations a Loop may run in one request before it fails (a guard against a trip count
/// sent by a client, or a condition that never clears, holding a stream forever).
inline constexpr int64_t kDefaultMaxLoopIterations = int64_t{1} << 24;

/// Iterations that planning may compute one by one (a Loop of known inputs whose body cannot be
/// planned once for all iterations), in all over one plan and the plans of its subgraphs: each
/// plans the body anew, so a hostile model's trip count would hold the planner for hours under
/// kDefaultMaxLoopIterations. torchvision's detection heads loop once per detection (at most a
/// few hundred).
inline constexpr int64_t kDefaultMaxUnrolledIterations = 4096;

struct PlanOptions {
  int intra_op_threads = 1;  // passed to every kernel's Prepare
  /// Cap on the bytes one plan owns: input staging, output buffers, values computed at plan
  /// time and the arena (intermediates and workspaces). Checked before each allocation; over it
  /// Create fails with RESOURCE_EXHAUSTED naming the node. 0: no cap.
  int64_t max_plan_bytes = 0;
  /// When not empty: the element type of each graph input, in place of the graph's own (a
  /// subgraph's inputs take their types from the node that runs it).
  std::vector<DataType> input_dtypes;
  /// Whether the graph inputs' declared dims are only hints, of which just the rank is checked
  /// (false for a model's inputs: known dims must match, and a symbolic dim takes one size in all
  /// of them). A subgraph's plan (If, Loop) says true: exporters name the dims of loop-carried
  /// values after other values (torchvision's keypointrcnn declares its [0,17] scores with the
  /// dims of its [0,3,17] keypoints) and declare a growing value with its first size
  /// (maskrcnn's masks, [0,320,320] as it enters the loop).
  bool input_shapes_are_hints = false;
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
  int64_t max_unrolled_iterations = kDefaultMaxUnrolledIterations;
  /// The iterations computed one by one so far, shared by a plan and its subgraphs' plans
  /// (ExecutionPlan::Create makes it where it is null).
  std::shared_ptr<int64_t> unrolled_iterations;
  /// Streams a capture may fork independent branches onto (branch_plan.h); 1: never fork. The
  /// steps of a region of N lanes are prepared with intra_op_threads / N threads (at least 1),
  /// so lanes x threads stay within intra_op_threads.
  int max_branch_streams = 1;
  /// The least estimated work (ns) a lane must carry for a region to fork.
  int64_t min_branch_cost_ns = kDefaultMinBranchCostNs;
};

class ControlFlowKernel;

/// The data of a value known at plan time as a TensorDesc carries it: non-null for an empty value
/// too, since kernels and the planner tell a known input by its non-null data and an empty
/// vector's data() may be null (a Loop carrying the [0,3,17] keypoints of no detection).
const void* KnownData(const TensorValue& value);

/// One kernel call with every pointer bound. The pointers point into the plan's buffers (arena,
/// input staging, output buffers) or into constants; they stay valid while the plan lives.
struct PlanStep {
  const PreparedKernel* kernel = nullptr;
  std::vector<const void*> inputs;  // nullptr for an absent optional input
  std::vector<void*> outputs;
  void* workspace = nullptr;  // kernel->workspace_bytes() bytes in the arena, or nullptr
  std::string node_name;      // for dumps and errors
  std::string op;
  /// For an If or Loop node: `kernel` as a ControlFlowKernel (control_flow.h), which a capture
  /// records as conditional tasks; nullptr for other nodes.
  const ControlFlowKernel* control = nullptr;
};

/// A graph input or output of the plan with its concrete shape.
struct PlanTensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  size_t bytes = 0;
  /// Inputs: the staging buffer (inputs are copied here before a run).
  /// Outputs: where the value is after a run (an output buffer, a constant or a staged input).
  uint8_t* data = nullptr;
  /// Inputs of a value-keyed plan: the value the plan was made for (StageInput refuses any
  /// other), else nullptr.
  const uint8_t* fixed_value = nullptr;
  /// Outputs: the value is known when planning (`data` points at it; no step writes it).
  bool known = false;
};

/// Copies `view`'s pieces into the staging buffer of `inputs[index]` on up to `threads`
/// threads (kernels::cpu::ParallelCopy) and zeros the rest of it (ExecutionPlan::StageView
/// and DevicePlan::StageView). OUT_OF_RANGE for an index past the inputs or pieces larger
/// than the buffer; returns the bytes copied.
absl::StatusOr<size_t> StageViewInto(const std::vector<PlanTensor>& inputs, size_t index,
                                     const InputView& view, int threads = 1);

/// The result of planning a graph for fixed input shapes: shapes of every tensor propagated
/// through the kernels' Prepare, values computable at plan time computed (shape subgraphs),
/// the kernels of the remaining nodes prepared, and every intermediate placed in one 64-byte
/// aligned arena by a liveness-based memory plan.
///
/// Execution is a walk over `steps()`: eagerly with `RunSteps()`, or by enqueueing each step
/// onto a stream inside a capture (`ForEachStep`). Staging inputs, running and reading outputs
/// use the plan's own buffers, so one plan runs one request at a time (like a runtime
/// instance): not thread-safe for concurrent runs; read-only accessors are.
///
/// Lifetime: the plan borrows the Graph it was built from (kernels may keep pointers to its
/// constants): the graph must outlive the plan.
class ExecutionPlan {
 public:
  /// Plans `graph` for `input_shapes` (one per graph input, in graph order). Errors name the
  /// input (shape the model cannot take) or the node whose kernel refused its inputs.
  ///
  /// `fixed_inputs`, when not empty, has one entry per graph input: a non-null entry makes that
  /// input's value known at plan time (as a constant; e.g. the shape input of a Reshape), and
  /// the plan then only accepts that value. Borrowed during the call only.
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Create(
      const Graph& graph, const KernelRegistry& registry, const std::vector<Shape>& input_shapes,
      const PlanOptions& options = {}, const std::vector<const TensorValue*>& fixed_inputs = {});

  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;

  const std::vector<PlanStep>& steps() const { return steps_; }
  const std::vector<PlanTensor>& inputs() const { return inputs_; }
  const std::vector<PlanTensor>& outputs() const { return outputs_; }

  /// Calls `visitor(const PlanStep&)` for each step in order; stops at the first error.
  template <typename Visitor>
  absl::Status ForEachStep(Visitor&& visitor) const {
    for (const PlanStep& step : steps_) RETURN_IF_ERROR(visitor(step));
    return absl::OkStatus();
  }

  /// Bytes of the intermediates' arena (workspaces included).
  size_t arena_bytes() const { return arena_bytes_; }
  /// Sum of the sizes of all intermediates and workspaces (each rounded up to 64 bytes): what
  /// the arena would need without reuse.
  size_t intermediate_bytes() const { return intermediate_bytes_; }
  /// Bytes the plan owns besides the arena: input staging, output buffers and the values
  /// computed at plan time (what a memory budget counts along with the arena).
  size_t owned_bytes() const { return owned_bytes_; }
  /// Number of nodes computed at plan time (shape subgraphs and the like).
  int folded_nodes() const { return folded_nodes_; }
  /// PlanOptions::intra_op_threads of the plan (at least 1): the threads its kernels use.
  int intra_op_threads() const { return intra_op_threads_; }
  /// The most runs any step's kernel still needs before its timed choices are made
  /// (PreparedKernel::settling_runs): 0 once every step has chosen.
  uint64_t settling_runs() const;
  /// Number of Reshape-family nodes planned as views of their input (no step, no buffer).
  int view_nodes() const { return view_nodes_; }
  /// Number of steps whose output 0 is written over an input's buffer (PreparedKernel::
  /// in_place_input: e.g. a convolution's residual), saving the copy.
  int in_place_steps() const { return in_place_steps_; }
  /// Number of concatenation inputs read in place (PreparedKernel::input_offsets_in_output),
  /// saving their copies: written by their producers inside the concatenation's buffer, or
  /// lying one after another where a later concatenation placed them, the output a view of
  /// their bytes (DenseNet's blocks).
  int placed_inputs() const { return placed_inputs_; }
  /// Regions of independent branches that a capture forks onto helper streams (in plan order;
  /// empty unless PlanOptions::max_branch_streams > 1 and some branches pay). The memory plan
  /// keeps the buffers of a region's lanes apart; RunSteps runs them in plan order.
  const std::vector<ParallelRegion>& parallel_regions() const { return regions_; }
  /// Streams a capture of this plan uses: 1 + the most helper lanes of any region.
  int num_streams() const {
    size_t most = 1;
    for (const ParallelRegion& region : regions_) most = std::max(most, region.lanes.size());
    return static_cast<int>(most);
  }

  /// Host regions owned by the plan that steps may point into besides inputs(), outputs() and
  /// the graph's constants: the arena and the values computed at plan time, as (address,
  /// bytes). A device backend relocates a plan into device memory with them.
  std::vector<std::pair<const void*, size_t>> OwnedRegions() const {
    std::vector<std::pair<const void*, size_t>> regions = {{arena_->data(), arena_->size()}};
    for (const auto& value : known_) {
      if (value != nullptr) regions.emplace_back(value->bytes.data(), value->bytes.size());
    }
    return regions;
  }

  /// The buffer that holds the intermediates: the plan's own, or one it shares (UseArena).
  const std::shared_ptr<AlignedBuffer>& arena() const { return arena_; }
  /// Moves the intermediates into `arena` (at least arena_bytes() bytes): every step pointer
  /// into the current arena is rebased and the current arena is released. Plans that never run
  /// at the same time (e.g. the plans of one stream) may share one arena, since intermediates
  /// live only within a run. Call before capturing the plan (an instance records the pointers)
  /// and never during a run. INVALID_ARGUMENT when `arena` is null or too small.
  absl::Status UseArena(std::shared_ptr<AlignedBuffer> arena);

  /// Copies `value` into input `index`'s staging buffer. Error naming the input when its
  /// element type or shape differs from the plan's. A string input is staged as its views:
  /// `value` (its string bytes) must then stay alive and unchanged until the run's outputs
  /// have been read (ReadOutput copies strings out).
  absl::Status StageInput(size_t index, const TensorValue& value);
  /// The request path's staging: copies `view`'s pieces into input `index`'s staging buffer
  /// (each byte once) and zeros the rest of it (a batch's padding rows). The view was validated
  /// and this plan was found by its shape (and, for a value-keyed plan, its value), so only the
  /// bounds are checked: OUT_OF_RANGE when the pieces hold more than the buffer. Returns the
  /// bytes copied.
  absl::StatusOr<size_t> StageView(size_t index, const InputView& view);
  /// Runs every step on the calling thread, in order. Error names the failing node.
  absl::Status RunSteps() const;
  /// Copies output `index` out of the plan.
  TensorValue ReadOutput(size_t index) const;

  /// Stages `inputs` (exactly the plan's inputs, in order), runs and returns the outputs in
  /// graph order.
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<const TensorValue*>& inputs);

 private:
  ExecutionPlan() = default;
  friend class PlanBuilder;

  std::vector<PlanStep> steps_;
  std::vector<ParallelRegion> regions_;
  std::vector<PlanTensor> inputs_;
  std::vector<PlanTensor> outputs_;
  std::vector<std::unique_ptr<PreparedKernel>> kernels_;
  // Values computed at plan time; null where the planner freed one that nothing reads.
  std::vector<std::unique_ptr<TensorValue>> known_;
  std::shared_ptr<AlignedBuffer> arena_;  // never null once built
  std::vector<AlignedBuffer> input_buffers_;
  std::vector<AlignedBuffer> output_buffers_;
  size_t arena_bytes_ = 0;
  size_t intermediate_bytes_ = 0;
  size_t owned_bytes_ = 0;
  int folded_nodes_ = 0;
  int view_nodes_ = 0;
  int in_place_steps_ = 0;
  int placed_inputs_ = 0;
  int intra_op_threads_ = 1;
};

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_EXECUTION_PLAN_H_
