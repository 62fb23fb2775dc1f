// Runs a model on one core stream: the first run of an input-shape signature is captured into a
// model runtime instance (ModelRI) and every later run of that signature replays it.
#ifndef REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_
#define REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"
#include "runtime/engine/device_plan.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine {

enum class ExecMode {
  kEager,   // each step dispatched in turn on the stream
  kReplay,  // capture the first run of a shape, replay it afterwards
};

/// What one Run did.
struct StreamRunInfo {
  bool planned = false;         // a plan was made for this signature by this run
  bool captured = false;        // this run captured a new instance
  bool replayed = false;        // this run replayed an instance (a capturing run also replays it)
  bool eager = false;           // ran eagerly (kEager, or capture failed for this signature)
  bool capture_failed = false;  // this run tried to capture the signature and failed
  std::string capture_error;    // why, when capture_failed
  int evictions = 0;            // instances this run evicted to make room (LRU or budget)
  bool transient = false;       // over the memory budget: planned for this run only
  int64_t plan_ns = 0;
  int64_t choose_ns = 0;  // timing plans of fewer threads (StreamSessionOptions::choose_threads)
  int64_t capture_ns = 0;
  /// Replays after the capture, before the outputs are read, that let the kernels make their
  /// timed choices (StreamSessionOptions::settle_budget_ns), and their time.
  int settle_runs = 0;
  int64_t settle_ns = 0;
  int64_t run_ns = 0;  // staging + execution + reading outputs (settling runs included)
};

/// One captured (or eager-fallback) signature of a StreamSession. `state` is "capturing" only
/// while the first run of the signature is making its instance.
struct StreamInstanceInfo {
  std::string shape_signature;  // e.g. "x:[1,4];y:[1]"
  /// "captured", "eager" (capture failed or not wanted; the reason below) or "evicted" (its
  /// plan and instance were freed by the LRU bound or the memory budget; made again on use).
  std::string state;
  std::string reason;
  uint64_t captures = 0;
  uint64_t replays = 0;
  uint64_t eager_runs = 0;
  int64_t capture_ns = 0;
  uint64_t arena_bytes = 0;
  int64_t last_used_ms = 0;  // wall clock, ms since the epoch
  int64_t batch_rows = 0;    // first dimension of the first input (0 for a scalar / no input)
  int intra_op_threads = 0;  // the threads its plan's kernels use
  /// How they were chosen (StreamSessionOptions::choose_threads): each plan's median run time
  /// and how many runs it is the median of, then the threads kept, e.g. "2 threads 1.30 ms (9
  /// runs), 1 thread 0.91 ms (9 runs): 1"; empty when nothing was timed (one thread, choosing
  /// off, or a run over the limit).
  std::string threads_choice;
  /// A model cut at its value-dependent nodes (Model::value_split): "prefix" or "tail", the part
  /// whose plan this is; empty for a plan of the whole model.
  std::string part;
};

/// Totals of one session (for statistics and metrics).
struct StreamSessionCounters {
  uint64_t captures = 0;  // instances captured (recaptures after eviction included)
  uint64_t replays = 0;
  uint64_t eager_runs = 0;
  uint64_t evictions = 0;         // instances freed by the LRU bound or the memory budget
  uint64_t capture_failures = 0;  // signatures that fell back to eager
  uint64_t budget_refusals = 0;   // runs planned transiently because the budget was spent
  /// Plans made for input values, not only shapes (a shape follows a value: Reshape's shape
  /// input, an If whose branches differ in shape, a Loop's trip count before scan outputs).
  uint64_t value_plans = 0;
  /// Input bytes copied into the plans' staging buffers (ExecutionPlan::StageView): a run copies
  /// each byte of its inputs once.
  uint64_t staged_bytes = 0;
  uint64_t live_instances = 0;  // plans held now
  uint64_t live_bytes = 0;      // their arenas and own buffers (what the budget counts)
  uint64_t arena_bytes = 0;     // their distinct arenas alone
};

/// A memory budget for the arenas of the plans (instances) of many sessions, e.g. the whole
/// server's. Thread-safe; must outlive the sessions that use it.
class InstanceBudget {
 public:
  /// `limit_bytes` 0: no limit (only counts).
  explicit InstanceBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  /// Takes `bytes` when they fit under the limit; false (nothing taken) otherwise.
  bool TryReserve(uint64_t bytes);
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

/// Bounds of a session's instance cache.
struct StreamSessionOptions {
  /// Plans (captured instances and eager plans) kept at once; the least recently used one is
  /// evicted to make room. 0: no bound.
  int max_instances = 0;
  /// Shared budget for the plans' bytes (arenas and the plans' own buffers); null: none.
  /// Borrowed. When a new plan does not fit, this session's least recently used plans are
  /// evicted; if it still does not fit the run uses a plan made for it alone (counted in
  /// budget_refusals), and a plan larger than the whole budget is refused
  /// (RESOURCE_EXHAUSTED).
  InstanceBudget* budget = nullptr;
  /// Run device plans (DevicePlan: the plan relocated into Device::Malloc memory, inputs staged
  /// through pinned memory with recorded copies) even on a device whose memory is host memory,
  /// e.g. to test the device path on the CPU backend. A device without host memory
  /// (Device::host_memory() false, e.g. CUDA) always runs device plans.
  bool device_plans = false;
  /// The model's constants on the device, for device plans; shared with the model's other
  /// sessions on that device (made with DeviceConstants::Create for the same model and
  /// device). Null: the session uploads its own copy at Create.
  std::shared_ptr<const DeviceConstants> device_constants;
  /// Intra-op threads by measurement. A new plan of a model with more than one intra-op thread
  /// is run with the signature's inputs and, when a run takes at most choose_threads_max_run_ns,
  /// timed against a plan of half its threads (runs in alternation on this stream, unless the
  /// smaller plan's first warm run is already 1.25 times slower); while the smaller plan is
  /// clearly faster (median and fastest runs under kChooseThreadsMargin of the other's) it is kept
  /// and half as many threads again are tried, down to one. Small models can run faster on fewer
  /// threads: on two cores that share no cache, ShuffleNet V2 x0.5 at batch 1 took 1.40 ms on two
  /// threads and 0.89 ms on one. Larger runs are not timed (their steps gain from the threads, and
  /// timing them would delay the first request more). The trial plan's bytes are taken from the
  /// budget while it lives; when they do not fit, nothing is tried. Device plans are never timed.
  bool choose_threads = true;
  int64_t choose_threads_max_run_ns = 10'000'000;
  /// A run that captures an instance on the host replays it again, up to kMaxSettleRuns times
  /// and while these replays have taken less than this, until its kernels have made the choices
  /// they make by timing runs (ExecutionPlan::settling_runs: a convolution racing two ways, a
  /// step clearing its buffers first where faster), so that the requests after it (after a
  /// warm-up: the first request) meet the chosen ways. 0: no such replays.
  int64_t settle_budget_ns = 2'000'000'000;
  static constexpr int kMaxSettleRuns = 8;
  /// Tests: the run time a choice uses for a run of a plan of `threads` threads that took
  /// `measured_ns`; null: the measured time.
  std::function<int64_t(int threads, int64_t measured_ns)> choose_threads_clock;
};

/// A plan of fewer threads replaces the current one when its median and its fastest run times
/// are both below this share of the current plan's. Another process taking one of the cores
/// during the trial slows the plan of more threads only: with 0.95 and medians alone, a trial
/// under load kept LR-ASPP MobileNetV3 (batch 1) on one thread (5.96 ms against 6.31 ms),
/// though on a quiet machine it runs 4.7 ms on two threads and 6.3 ms on one.
inline constexpr double kChooseThreadsMargin = 0.92;

/// True when both the median and the fastest of `candidate_ns` are below `margin` times those
/// of `current_ns` (run times of two plans timed in alternation); false when either is empty.
bool ClearlyFaster(std::vector<int64_t> candidate_ns, std::vector<int64_t> current_ns,
                   double margin = kChooseThreadsMargin);

/// A model bound to one stream of `device`, with its own plan and instance cache keyed by the
/// input-shape signature (plans are per stream because an instance binds its plan's buffers).
///
/// Capture (kReplay): on the first run of a signature the plan is made (every allocation and
/// kernel preparation happens there, before BeginCapture), then the stream captures in
/// THREAD_LOCAL mode (so that unsafe calls of other threads, e.g. other sessions synchronising
/// their streams, neither fail nor invalidate it) one LaunchKernel per plan step, and the
/// instance is executed for this run. Later runs copy the inputs into the plan's input buffers,
/// Execute the instance (on the calling thread when the stream is idle) and hand the outputs
/// to the caller from the plan's buffers.
///
/// Staging: on a device whose memory is host memory (the CPU backend, Device::host_memory())
/// the recorded kernels read the plan's own input buffers (64-byte aligned host memory) and
/// write its output buffers, whose addresses are fixed for the plan's life: a run copies its
/// inputs once into those buffers and the caller reads the outputs where the plan wrote them.
/// On a device with its own memory (CUDA) each plan is relocated into device memory
/// (DevicePlan: arena, staging and output buffers from Device::Malloc; the model's constants
/// uploaded once per session, or shared through StreamSessionOptions::device_constants):
/// a run copies its inputs once into pinned host memory (Device::MallocHost), and the stream
/// runs the H2D copies, the steps and the D2H copies of the outputs back into pinned memory,
/// all recorded in the captured instance (a CUDA graph), so a replay is one launch. If and Loop
/// steps and string tensors run only on host memory: their plans fail there (UNIMPLEMENTED).
///
/// Failure: when BeginCapture, a recorded launch, EndCapture or the first replay of a
/// signature fails, that signature runs eagerly from then on (state "eager", the error kept as
/// `reason`) and the run still succeeds when the eager run does.
///
/// A model cut at its value-dependent nodes (Model::value_split; host memory only) runs through
/// two inner sessions on streams of their own: the prefix's, keyed by shapes and replayed, and
/// the tail's, planned for the prefix's outputs (its latest plan alone kept: the same input again
/// finds it). The outputs are copied out of both before `visit`
/// sees them. If that fails for a run and the whole model's plan then succeeds, the session
/// runs the whole model from then on. ListInstances and counters cover all three.
///
/// Value-keyed models (Model::PlanForInputs): once a model needed a plan with
/// input values fixed, signatures also hold the values of the value-key candidate inputs, e.g.
/// "x:[2,3];shape:[2]=(3,2)", one plan and instance per distinct value.
///
/// Lifetime: `device` is borrowed and must outlive the session; the session owns its stream,
/// plans and instances. Thread-safety: Run is called by one thread at a time (a stream serves
/// one request at a time); ListInstances / DumpInstance may be called from any thread.
class StreamSession {
 public:
  static absl::StatusOr<std::unique_ptr<StreamSession>> Create(std::shared_ptr<const Model> model,
                                                               Device* device, ExecMode mode,
                                                               StreamSessionOptions options = {});
  ~StreamSession();

  /// Called after a run with each output in graph order; `output.data` is valid during the
  /// call only (the plan's buffer). An error ends the run with that error.
  using OutputVisitor = absl::FunctionRef<absl::Status(size_t index, const PlanTensor& output)>;

  /// The request path. Finds or makes the plan and instance for the inputs' shapes (and values,
  /// for a value-keyed model), stages each input with one copy of its pieces
  /// (ExecutionPlan::StageView), runs, and hands each output to `visit`. A replay runs on the
  /// calling thread when the stream is idle (ModelRI::Execute). If capturing a signature fails,
  /// that signature runs eagerly from then on and the run still succeeds. `capture` false: a
  /// new signature is planned but never captured (state "eager", e.g. a batch above the largest
  /// capture bucket). Nothing about the inputs is checked again beyond what only the plan
  /// knows (its limits, the staging bounds).
  absl::Status Run(const ValidatedInputs& inputs, OutputVisitor visit,
                   StreamRunInfo* info = nullptr, bool capture = true);

  /// The same for owned tensors (tools, tests, warm-up): validates them (Model::Validate) and
  /// returns copies of the outputs in graph order.
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs,
                                               StreamRunInfo* info = nullptr, bool capture = true);

  std::vector<StreamInstanceInfo> ListInstances() const;
  StreamSessionCounters counters() const;
  /// The JSON dump (ModelRI::DumpJson) of the instance for `shape_signature`; NOT_FOUND when
  /// there is none.
  absl::StatusOr<std::string> DumpInstance(absl::string_view shape_signature, bool verbose) const;

  ExecMode mode() const;
  const Model& model() const;
  /// Whether runs go through device plans (see Staging in the class comment).
  bool device_plans() const;

 private:
  struct Impl;
  explicit StreamSession(std::unique_ptr<Impl> impl);
  // Run for the whole model's plans.
  absl::Status RunWhole(const ValidatedInputs& inputs, OutputVisitor visit, StreamRunInfo* info,
                        bool capture);

  std::unique_ptr<Impl> impl_;
};

/// "name:[d0,d1];name2:[d0]" in graph-input order.
std::string ShapeSignature(const std::vector<NamedTensor>& inputs);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_
