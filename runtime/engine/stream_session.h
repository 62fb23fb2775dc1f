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

/// One captured (or eager-fallback) signature of a StreamSession.
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
/// Lifetime: `device` is borrowed and must outlive the session; the session owns its stream,
/// plans and instances. Thread-safety: Run is called by one thread at a time (a stream serves
/// one request at a time); ListInstances / DumpInstance may be called from any thread.
class StreamSession {
 public:
  static absl::StatusOr<std::unique_ptr<StreamSession>> Create(
      std::shared_ptr<const Model> model, Device* device, ExecMode mode);
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
};

/// "name:[d0,d1];name2:[d0]" in graph-input order.
std::string ShapeSignature(const std::vector<NamedTensor>& inputs);

}  // namespace reprise::runtime::engine

#endif  // REPRISE_RUNTIME_ENGINE_STREAM_SESSION_H_
