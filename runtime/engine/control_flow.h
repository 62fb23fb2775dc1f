// If and Loop: nodes whose subgraphs are planned into plans of their own, run on the host or
// recorded into a capture as the runtime's conditional tasks (IF, WHILE).
#ifndef REPRISE_RUNTIME_ENGINE_CONTROL_FLOW_H_
#define REPRISE_RUNTIME_ENGINE_CONTROL_FLOW_H_

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/core/kernel.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/stream.h"
#include "runtime/engine/branch_plan.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/graph.h"

namespace reprise::runtime::engine {

/// The streams on which conditional bodies are captured: one per nesting depth (a body is
/// captured while its parent's capture is open), made on first use. Not thread-safe; owned by
/// whoever captures (a stream session).
class BodyStreams {
 public:
  explicit BodyStreams(Device* device) : device_(device) {}
  absl::StatusOr<Stream*> At(size_t depth);

 private:
  Device* device_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

/// What a control-flow step needs to record itself into an open capture.
struct CaptureScope {
  ModelRI* root = nullptr;  // the instance being captured: it owns the condition values
  BodyStreams* bodies = nullptr;
  size_t depth = 0;  // bodies of this level are captured on bodies->At(depth)
  CaptureMode mode = CaptureMode::kThreadLocal;
  /// Where a plan's parallel regions fork (ExecutionPlan::parallel_regions); null: every step
  /// on the capturing stream.
  BranchStreams* branches = nullptr;
};

/// The kernel of an If or Loop node. Run executes the node on the calling thread (its
/// subgraphs' plans step by step); Record records it into the capture open on `stream`:
/// - If whose condition is known when planning: the chosen branch's steps, inline;
/// - If: a task that turns the condition into a condition value, then an IF conditional task
///   with one body per branch;
/// - Loop: a task that stages the initial values and sets the condition value (condition and
///   iteration < trip count), then a WHILE conditional task whose body is the body's steps
///   followed by a task that moves the loop-carried values, writes the scan outputs' slice and
///   sets the condition value again, then a task that writes the final values.
/// The kernel owns its subgraphs' plans (with their own arenas), so one plan of a model runs
/// one request at a time, as any plan.
class ControlFlowKernel : public PreparedKernel {
 public:
  virtual absl::Status Record(const PlanStep& step, Stream* stream,
                              const CaptureScope& scope) const = 0;
  /// Bytes the kernel owns: its subgraphs' plans (arenas and buffers) and its scratch.
  virtual size_t owned_bytes() const = 0;
};

/// Plans `node` (If or Loop) for `inputs` (one per node input: ONNX inputs, then the outer
/// values its subgraphs read; `data` set for values known when planning). Errors name what
/// the node cannot take; FAILED_PRECONDITION when the output shapes depend on a value only
/// known at run time (branches of different shapes, scan outputs of a data-dependent trip
/// count), which a plan for the input values can resolve (Model::PlanForInputs).
absl::StatusOr<std::unique_ptr<ControlFlowKernel>> PlanControlFlow(
    const Node& node, const std::vector<TensorDesc>& inputs, const KernelRegistry& registry,
    const PlanOptions& options);

/// Enqueues `plan`'s steps on `stream`. With `scope` (the stream is capturing) a control-flow
/// step records itself as conditional tasks, and with `scope->branches` the plan's parallel
/// regions fork onto helper streams (EnqueueForked); without, every step is one kernel launch (a
/// control-flow step then runs its subgraphs on the stream's worker). Errors name the node.
absl::Status EnqueuePlan(const ExecutionPlan& plan, Stream* stream, const CaptureScope* scope);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_CONTROL_FLOW_H_
