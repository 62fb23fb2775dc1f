// Runs a model on one core stream: the first run of an input-shape signature is captured into a
// model runtime instance (ModelRI) and every later run of that signature replays it.
#ifndef REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_
#define REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"
#include "runtime/engine/execution_plan.h"
#include "runtime/engine/model.h"

namespace reprise::runtime::engine {

enum class ExecMode {
  kEager,   // each step dispatched in turn on the stream
  kReplay,  // capture the first run of a shape, replay it afterwards
};

/// What one Run did.
struct StreamRunInfo {
  bool planned = false;   // a plan was made for this signature by this run
  bool captured = false;  // this run captured a new instance
  bool replayed = false;  // this run replayed an instance (a capturing run also replays it)
  bool eager = false;     // ran eagerly (kEager, or capture failed for this signature)
  int64_t plan_ns = 0;
  int64_t capture_ns = 0;
  int64_t run_ns = 0;  // staging + execution + reading outputs
};

/// One captured (or eager-fallback) signature of a StreamSession. `state` is "capturing" only
/// while the first run of the signature is making its instance.
struct StreamInstanceInfo {
  std::string shape_signature;  // e.g. "x:[1,4];y:[1]"
  std::string state;            // "captured" or "eager" (capture failed; the reason below)
  std::string reason;
  uint64_t captures = 0;
  uint64_t replays = 0;
  uint64_t eager_runs = 0;
  int64_t capture_ns = 0;
  uint64_t arena_bytes = 0;
  int64_t last_used_ms = 0;  // wall clock, ms since the epoch
};

/// A model bound to one stream of `device`, with its own plan and instance cache keyed by the
/// input-shape signature (plans are per stream because an instance binds its plan's buffers).
///
/// Capture (kReplay): on the first run of a signature the plan is made (every allocation and
/// kernel preparation happens there, before BeginCapture), then the stream captures in
/// THREAD_LOCAL mode (so that unsafe calls of other threads, e.g. other sessions synchronising
/// their streams, neither fail nor invalidate it) one LaunchKernel per plan step, and the
/// instance is executed for this run. Later runs copy the inputs into the plan's input buffers,
/// ExecuteAsync the instance, Synchronize and copy the outputs out of the plan.
///
/// Staging: the recorded kernels read the plan's own input buffers (64-byte aligned host
/// memory) and write its output buffers, whose addresses are fixed for the plan's life. That is
/// right for the CPU backend (device memory is host memory) and only for it: a device with its
/// own memory would need pinned (`MallocHost`) staging with recorded H2D / D2H copies and a
/// plan allocated with `Device::Malloc`, which the planner does not do yet.
///
/// Failure: when BeginCapture, a recorded launch, EndCapture or the first replay of a
/// signature fails, that signature runs eagerly from then on (state "eager", the error kept as
/// `reason`) and the run still succeeds when the eager run does.
///
/// Value-keyed models (Session's rule, Model::PlanForInputs): once a model needed a plan with
/// input values fixed, signatures also hold the values of the value-key candidate inputs, e.g.
/// "x:[2,3];shape:[2]=(3,2)", one plan and instance per distinct value.
///
/// Lifetime: `device` is borrowed and must outlive the session; the session owns its stream,
/// plans and instances. Thread-safety: Run is called by one thread at a time (a stream serves
/// one request at a time); ListInstances / DumpInstance may be called from any thread.
class StreamSession {
 public:
  static absl::StatusOr<std::unique_ptr<StreamSession>> Create(std::shared_ptr<const Model> model,
                                                               Device* device, ExecMode mode);
  ~StreamSession();

  /// Validates `inputs` (Model::MatchInputs), finds or makes the plan and instance for their
  /// shapes, runs and returns the outputs in graph order. If capturing a signature fails, that
  /// signature runs eagerly from then on and the run still succeeds.
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs,
                                               StreamRunInfo* info = nullptr);

  std::vector<StreamInstanceInfo> ListInstances() const;
  /// The JSON dump (ModelRI::DumpJson) of the instance for `shape_signature`; NOT_FOUND when
  /// there is none.
  absl::StatusOr<std::string> DumpInstance(absl::string_view shape_signature, bool verbose) const;

  ExecMode mode() const;
  const Model& model() const;

 private:
  struct Impl;
  explicit StreamSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// "name:[d0,d1];name2:[d0]" in graph-input order.
std::string ShapeSignature(const std::vector<NamedTensor>& inputs);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_
