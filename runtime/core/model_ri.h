// ModelRI: a model runtime instance, the product of a stream capture.
#ifndef REPRISE_RUNTIME_CORE_MODEL_RI_H_
#define REPRISE_RUNTIME_CORE_MODEL_RI_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/runtime_types.h"
#include "runtime/core/task_observer.h"

namespace reprise::runtime {

class Stream;

/// One stream of an instance, as enumerated: its index (0 is the origin, the stream that
/// began the capture) and how many tasks it holds.
struct RiStreamInfo {
  int index = 0;
  size_t num_tasks = 0;
};

/// A recorded task sequence over one or more streams (joined by events), with every buffer
/// pointer bound at capture time. Made by EndCapture (capture.h) or by BuildBegin .. BuildEnd
/// (build.h), owned by its caller; child
/// instances (conditional bodies) are owned by their parent and destroyed with it.
///
/// Buffers: the instance does NOT own the buffers its tasks use, nor the prepared kernels or
/// events; the owner guarantees that they outlive the instance's last execution.
///
/// Execution: ExecuteAsync queues the whole sequence on `stream` (any stream of the same
/// device that is not capturing). A second ExecuteAsync while one is pending is *queued*: it
/// runs after the first, also when issued on another stream (that stream's worker waits for
/// the instance). Destroying the ModelRI object while executions are pending is allowed: the
/// recorded data stays alive until the last pending execution has finished.
///
/// A launch queued on a second stream holds that stream's worker until the first launch is
/// done, so a first launch must not wait on an event recorded by the second stream after it.
///
/// Thread-safety: ExecuteAsync, enumeration and DumpJson may be called from any thread, but not
/// while a task update of the instance is being applied. A task group update
/// (Stream::BeginTaskUpdate) is applied in the update stream's order; the caller orders it
/// against replays that run the group (events or synchronisation).
class ModelRI {
 public:
  virtual ~ModelRI() = default;

  /// A process-unique id, used in messages and dumps.
  virtual uint64_t id() const = 0;

  /// Queues one execution on `stream`. Error if the instance is still being captured, is a
  /// child (runs only through its parent), or if `stream` is capturing or of another device.
  virtual absl::Status ExecuteAsync(Stream* stream) = 0;

  /// One execution, waited for: ExecuteAsync (a refused launch returns its error at once), then
  /// `stream`'s Synchronize (its result, and the same refusals). A backend may run it on the
  /// calling thread when `stream` has nothing queued (the CPU backend does: no hand-off to the
  /// stream's worker and back); the stream's order holds either way.
  virtual absl::Status Execute(Stream* stream);

  /// Creates a condition on this instance while it is being captured. With `assign_default`
  /// the value is reset to `default_value` at the start of every launch, so a host write made
  /// before a launch does NOT survive; without it the value persists across launches (starts
  /// at `default_value`) and host writes made before a launch are seen by it.
  virtual absl::StatusOr<ConditionHandle> CreateCondition(uint32_t default_value,
                                                          bool assign_default) = 0;

  /// Number of streams (1 + the streams forked into the capture).
  virtual size_t NumStreams() const = 0;
  /// Fills `out` with the streams; error naming the needed size when `out` is too small.
  virtual absl::Status GetStreams(std::span<RiStreamInfo> out) const = 0;
  /// Number of tasks on stream `stream` (error for an unknown index).
  virtual absl::StatusOr<size_t> NumTasks(int stream) const = 0;
  /// Fills `out` with stream `stream`'s tasks in order; error naming the needed size when `out`
  /// is too small.
  virtual absl::Status GetTasks(int stream, std::span<TaskInfo> out) const = 0;

  /// The instance as JSON (capture_semantics.md §5). Always valid JSON.
  virtual std::string DumpJson(DumpFlags flags) const = 0;

  /// Installs `observer` (borrowed until it is removed; nullptr removes it): every launch that
  /// starts afterwards reports each task it runs, timed, conditional bodies included
  /// (task_observer.h). Change it only while no launch of the instance is pending. UNIMPLEMENTED
  /// where the backend cannot time its tasks (the default); error for a conditional body.
  virtual absl::Status SetTaskObserver(TaskObserver* observer) {
    (void)observer;
    return absl::UnimplementedError("this backend's instances cannot time their tasks");
  }
  /// Building (build.h), on an instance made by Device::BuildBegin. `stream` is borrowed; it
  /// stays bound (its async calls recorded or refused) until UnbindStream or until this
  /// instance is destroyed. Optional: UNIMPLEMENTED unless the backend builds instances.
  virtual absl::Status BindStream(Stream* stream, StreamBinding binding);
  virtual absl::Status EndTask(Stream* stream);
  virtual absl::Status BuildEnd();
  virtual absl::Status UnbindStream(Stream* stream);
};

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_MODEL_RI_H_
