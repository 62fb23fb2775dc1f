// The CPU backend's recorded form of work: a small POD task, and an instance's flat data (task
// arrays per stream, one pointer array for every kernel argument, conditions, groups). The
// replay loop (executor.cc) is a switch over Task::kind; nothing on the way allocates, hashes
// or looks at shapes.
#ifndef REPRISE_RUNTIME_CORE_CPU_TASK_H_
#define REPRISE_RUNTIME_CORE_CPU_TASK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "runtime/core/kernel.h"
#include "runtime/core/runtime_types.h"
#include "runtime/core/task_observer.h"

namespace reprise::runtime {
class Device;
}  // namespace reprise::runtime

namespace reprise::runtime::cpu {

class CpuEvent;
class AuxWorker;

/// How an event task finds its event: an internal slot of the instance (fork/join inside a
/// capture), an external event whose ticket comes from the launch, or an eager event task whose
/// ticket is in Task::aux.
enum EventBinding : uint8_t { kSlotEvent = 0, kExternalEvent = 1, kEagerEvent = 2 };

/// One task. Kernel arguments live in a flat pointer array owned by whoever owns the task (the
/// instance, or the queue item of an eager task): [args, args + num_inputs) are the inputs,
/// then num_outputs outputs, then one workspace pointer.
struct Task {
  TaskKind kind = TaskKind::kCopy;
  uint8_t sub = 0;  // CopyKind (copy), ConditionalKind (conditional), EventBinding (events)
  uint16_t num_inputs = 0;
  uint16_t num_outputs = 0;
  uint32_t seq = 0;   // sequence number on its stream
  uint32_t args = 0;  // first pointer in the flat pointer array (kernels)
  int32_t group = -1;
  void* dst = nullptr;  // copy / memset destination; host function user data
  const void* src = nullptr;
  size_t bytes = 0;
  union {
    const PreparedKernel* kernel;
    CpuEvent* event;
    HostFn fn;
    const void* none;
  } target = {nullptr};
  // memset value, slot index, external index, conditional index, or
  // the ticket of an eager event task.
  uint64_t aux = 0;
};

/// A stream switch (build.h) keeps its comparison and operand type in Task::sub, its value
/// pointer in Task::src, its right-hand side in Task::target.none and its target stream's index
/// in Task::aux.
inline uint8_t PackSwitch(CompareOp compare, SwitchDataType dtype) {
  return static_cast<uint8_t>(static_cast<uint8_t>(compare) | (static_cast<uint8_t>(dtype) << 4));
}
inline CompareOp SwitchCompare(const Task& task) { return static_cast<CompareOp>(task.sub & 0xf); }
inline SwitchDataType SwitchType(const Task& task) {
  return static_cast<SwitchDataType>(task.sub >> 4);
}

/// Number of pointers a kernel task owns in the flat array.
inline uint32_t NumArgPointers(const Task& task) {
  return task.kind == TaskKind::kKernel ? task.num_inputs + task.num_outputs + 1u : 0u;
}

struct RiData;

/// Tasks [first, end) of helper stream `stream` of a captured instance: a wait on a fork event
/// recorded by stream 0, work that waits on nothing, and a record of a join event that stream 0
/// waits on.
struct LaneSegment {
  int stream = 0;
  uint32_t first = 0;
  uint32_t end = 0;
};

/// A fork of a captured instance that replays on the launching thread's OpenMP team: after
/// stream 0's task `fork_task` (the fork record), the team runs `segments` and stream 0's tasks
/// up to `last_join` (its last wait on one of their joins); a team of one thread runs the
/// segments on stream 0's thread before its `first_join`.
struct TeamFork {
  uint32_t fork_task = 0;
  uint32_t first_join = 0;
  uint32_t last_join = 0;
  std::vector<LaneSegment> segments;
};

/// A condition's storage. Cache-line aligned so that a condition written by a task does not
/// share a line with its neighbours.
struct alignas(64) ConditionSlot {
  uint32_t value = 0;
  uint32_t default_value = 0;
  bool assign_default = false;
};

struct Conditional {
  ConditionalKind kind = ConditionalKind::kIf;
  uint32_t* value = nullptr;  // the condition's storage (owned by the instance that made it)
  std::vector<std::shared_ptr<RiData>> bodies;
};

struct GroupRange {
  int stream = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  bool open = true;
};

/// Where an external event task sits (its ticket is bound at launch).
struct ExternalRef {
  int stream = 0;
  uint32_t task = 0;
};

/// The recorded instance. Shared (std::shared_ptr) between the ModelRI object and queued
/// executions, so that it outlives its last pending execution.
struct RiData {
  RiData(uint64_t id_in, Device* device_in, bool child_in);
  ~RiData();
  RiData(const RiData&) = delete;
  RiData& operator=(const RiData&) = delete;

  const uint64_t id;
  Device* const device;
  const bool child;
  // A built instance (build.h): streams start at HEAD streams and through switch / activate
  // tasks, each on its own worker. Set before any task is recorded.
  bool built = false;
  std::vector<uint8_t> head;  // built: per stream, 1 when bound as HEAD

  // Written while capturing (under the capture mutex), read-only after the capture ends, except
  // for task updates (applied on a stream's worker, ordered by the caller).
  std::vector<std::vector<Task>> streams;
  std::vector<void*> ptrs;
  std::vector<std::unique_ptr<ConditionSlot>> conditions;
  std::vector<Conditional> conditionals;
  std::vector<GroupRange> groups;
  std::vector<ExternalRef> externals;
  uint32_t num_slots = 0;

  // Runtime state. run_mu serialises executions (a second launch queues behind the first).
  std::mutex run_mu;
  // Launch counter (epochs of the internal event slots). A top-level launch holds run_mu; a
  // child runs inside its parent's launch, so it is never run twice at once either.
  std::atomic<uint64_t> launches{0};
  std::mutex slot_mu;
  std::condition_variable slot_cv;
  std::vector<uint64_t> slot_epochs ABSL_GUARDED_BY(slot_mu);
  std::vector<std::unique_ptr<AuxWorker>> workers;  // one per stream after the first
  /// Set at Seal when every helper stream of a captured instance is a series of lane segments
  /// (in stream 0's task order): the helpers then run on the launching thread's OpenMP team, and
  /// `workers` stays empty.
  std::vector<TeamFork> team_forks;
  /// Times the tasks of the launches that start while set (ModelRI::SetTaskObserver).
  std::atomic<TaskObserver*> observer{nullptr};

  /// Called once the capture ended: sizes the runtime state, starts the workers.
  void Seal();
};

/// Where the outcome of a run goes: the executing stream's error slot.
struct ErrorSink {
  std::atomic<bool>* failed = nullptr;  // set once a task failed: compute tasks are skipped
  std::mutex* mu = nullptr;
  absl::Status* error = nullptr;              // the first failure, guarded by *mu
  const std::atomic<bool>* cancel = nullptr;  // set when the stream is being destroyed
};

struct BuiltLaunch;

/// State of one launch of an instance, shared by the threads that run its streams.
struct RunEnv {
  RiData* ri = nullptr;  // nullptr for eager tasks
  uint64_t epoch = 0;
  const uint64_t* tickets = nullptr;  // per ExternalRef of `ri`
  ErrorSink sink;
  uint64_t stream_id = 0;         // the executing stream, for messages
  BuiltLaunch* launch = nullptr;  // a launch of a built instance: which streams started
  /// Set for a launch of an instance with an observer (its bodies inherit it); nullptr else.
  TaskObserver* observer = nullptr;
};

/// Runs one task. `ptrs` is the flat pointer array the task's `args` index into; `stream` is
/// the task's stream index in `env.ri` (0 for eager tasks). Returns false when the rest of the
/// stream must not run (a stream switch whose comparison held: it jumped).
bool ExecuteTask(const Task& task, void* const* ptrs, RunEnv& env, int stream);

/// Runs every stream of `ri` once (extra streams on its workers), binding external tickets
/// from `tickets` (computed now when null). The caller holds ri.run_mu for a top-level launch.
void RunInstance(RiData& ri, const RunEnv& outer, const uint64_t* tickets);

/// Records `status` as the sink's first failure, prefixed with a label naming the task.
void ReportTaskFailure(const RunEnv& env, const Task& task, int stream, const absl::Status& status);

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_TASK_H_
