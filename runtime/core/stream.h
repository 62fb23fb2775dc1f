// Stream: an ordered asynchronous task queue, and the place where capture happens.
#ifndef REPRISE_RUNTIME_CORE_STREAM_H_
#define REPRISE_RUNTIME_CORE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/event.h"
#include "runtime/core/kernel.h"
#include "runtime/core/model_ri.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

class Device;

/// An ordered asynchronous task queue of one device; made by Device::CreateStream and owned by
/// the caller; the device must outlive it. Destroying a stream runs its queued tasks first
/// (waits blocked on events that are never recorded give up).
///
/// Enqueue calls return at once. While the stream is capturing they record the task into the
/// instance being filled instead (nothing runs); while a task update is open they collect the
/// replacement tasks. Every pointer passed is borrowed: it must stay valid until the task has
/// run, or, for a recorded task, for the life of the instance.
///
/// Asynchronous errors: when a task fails (a kernel's Run or a host function returns an error)
/// the stream keeps the first such status, which names the task (kind, sequence number, op);
/// later copies, memsets, kernels, host functions and instance executions on the stream are
/// skipped (event records, waits and resets still run, so other streams are not stranded)
/// until Synchronize returns the error and clears it.
///
/// Thread-safety: every method may be called from any thread; tasks from one thread keep their
/// order. The capture-mode rules of capture.h apply to Synchronize and Query.
class Stream {
 public:
  virtual ~Stream() = default;

  virtual Device* device() const = 0;
  /// Process-unique id, used in messages.
  virtual uint64_t id() const = 0;

  /// Copies `bytes` from `src` to `dst` in stream order. A host side in pageable memory makes
  /// this a potentially unsafe call, and it can never be recorded.
  virtual absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  /// Fills `bytes` at `dst` with `value` in stream order.
  virtual absl::Status MemsetAsync(void* dst, uint8_t value, size_t bytes) = 0;
  /// Runs `kernel` (borrowed; must outlive the task or the instance) with the bound pointers.
  /// `workspace` must hold kernel.workspace_bytes() bytes (or be nullptr when that is 0).
  virtual absl::Status LaunchKernel(const PreparedKernel& kernel,
                                    std::span<const void* const> inputs,
                                    std::span<void* const> outputs, void* workspace) = 0;
  /// Runs `fn(user_data)` in stream order on the stream's worker; an error is an async error.
  virtual absl::Status LaunchHostFunc(HostFn fn, void* user_data) = 0;
  /// LaunchHostFunc, then Synchronize: `fn` runs in the stream's order and the call returns
  /// once it and everything queued before it have run (Synchronize's refusals and error). A
  /// backend may run `fn` on the calling thread when nothing is queued (the CPU backend does),
  /// so a host thread that waits anyway pays no hand-off.
  virtual absl::Status RunHostFuncAndWait(HostFn fn, void* user_data);

  /// Event tasks (event.h for the semantics).
  virtual absl::Status RecordEvent(Event* event) = 0;
  virtual absl::Status WaitEvent(Event* event) = 0;
  virtual absl::Status ResetEvent(Event* event) = 0;

  /// Blocks until every task queued so far has run; returns (and clears) the first async
  /// error. A potentially unsafe call; illegal in every mode on a capturing stream.
  virtual absl::Status Synchronize() = 0;
  /// True when the queue is idle. Unsafe like Synchronize.
  virtual absl::StatusOr<bool> Query() = 0;

  // Capture (capture.h has the free functions that callers use).
  virtual absl::Status BeginCapture(CaptureMode mode) = 0;
  virtual absl::StatusOr<std::unique_ptr<ModelRI>> EndCapture() = 0;
  virtual CaptureInfo GetCaptureInfo() = 0;
  /// Captures into `body`, a child instance returned by AddConditional (owned by its parent).
  virtual absl::Status BeginBodyCapture(ModelRI* body, CaptureMode mode) = 0;
  virtual absl::Status EndBodyCapture() = 0;

  /// Records a conditional task on this capturing stream and returns its `num_bodies` child
  /// instances (owned by the parent instance; borrowed here), to be filled with
  /// BeginBodyCapture. IF takes 1 or 2 bodies, WHILE 1, SWITCH 1 or more.
  virtual absl::StatusOr<std::vector<ModelRI*>> AddConditional(ConditionalKind kind,
                                                               ConditionHandle condition,
                                                               int num_bodies) = 0;

  /// Task groups: tags the tasks recorded on this capturing stream between the two calls.
  virtual absl::Status BeginTaskGroup() = 0;
  virtual absl::StatusOr<TaskGroup> EndTaskGroup() = 0;
  /// Task update, on a stream that is not capturing: the copies, memsets, kernels and host
  /// functions issued between the two calls replace the group's tasks (same count, kinds and
  /// argument counts; new pointers, kernels, sizes). EndTaskUpdate checks and then queues the
  /// update on this stream: it is applied when the stream reaches it, so it also reaches a
  /// replay that is already queued on another stream and blocked before the group. A mismatch
  /// is an error and leaves the instance unchanged.
  virtual absl::Status BeginTaskUpdate(TaskGroup group) = 0;
  virtual absl::Status EndTaskUpdate() = 0;

  /// Built instances (build.h): records a stream switch / activate task on this stream, which
  /// must be bound to an instance being built (as must the target). Optional: UNIMPLEMENTED
  /// unless the backend builds instances.
  virtual absl::Status SwitchStream(const void* value, CompareOp compare, const void* rhs,
                                    SwitchDataType dtype, Stream* true_stream);
  virtual absl::Status ActiveStream(Stream* target);
};

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_STREAM_H_
