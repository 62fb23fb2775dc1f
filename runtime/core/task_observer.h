// An opt-in hook that times each task a runtime instance's replay runs (the profiler's source).
// Nothing in the core installs one; a launch without one pays one predictable branch per task.
#ifndef REPRISE_RUNTIME_CORE_TASK_OBSERVER_H_
#define REPRISE_RUNTIME_CORE_TASK_OBSERVER_H_

#include <cstdint>

#include "runtime/core/kernel.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

/// One task that a launch ran, with when it ran. `start_ns` / `end_ns` are
/// std::chrono::steady_clock times in nanoseconds.
struct TaskTiming {
  uint64_t instance = 0;  // the id of the instance holding the task (a body's own id)
  int stream = 0;         // the task's stream index within that instance
  uint32_t seq = 0;       // its sequence number on that stream
  TaskKind kind = TaskKind::kKernel;
  const PreparedKernel* kernel = nullptr;  // kernel tasks: the kernel that ran; else nullptr
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

/// Receives the timing of every task a launch of an instance runs while it is installed
/// (ModelRI::SetTaskObserver). A conditional task is reported after the body tasks it ran, so
/// its span encloses theirs.
///
/// Thread-safety: OnTask is called on the thread that ran the task, right after it, and
/// concurrently from the threads of an instance's streams; it must not block for long nor
/// launch, capture or update the instance.
class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  virtual void OnTask(const TaskTiming& timing) = 0;
};

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_TASK_OBSERVER_H_
