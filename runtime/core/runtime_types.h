// Small value types shared by the runtime core's interfaces (device, stream, event, ModelRI).
#ifndef REPRISE_RUNTIME_CORE_RUNTIME_TYPES_H_
#define REPRISE_RUNTIME_CORE_RUNTIME_TYPES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reprise::runtime {

class ModelRI;

/// Direction of a copy. The host side of a copy must be pinned host memory for the copy to be
/// asynchronous; pageable host memory makes the copy a "potentially unsafe" call.
enum class CopyKind : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };

/// Where a pointer lives, as the device sees it.
enum class MemoryKind : uint8_t { kDevice, kPinnedHost, kPageableHost };

/// A host function run in stream order. Plain function pointer (no std::function) so that a
/// recorded task stays a POD; `user_data` is borrowed and must outlive every run of the task.
using HostFn = absl::Status (*)(void* user_data);

/// Capture modes (CANN aclmdlRICaptureMode / cudaStreamCaptureMode). See capture.h.
enum class CaptureMode : uint8_t { kGlobal, kThreadLocal, kRelaxed };

/// State of a stream's capture.
enum class CaptureStatus : uint8_t { kNone, kActive, kInvalidated };

/// What CaptureInfo(stream) returns. `instance` is the instance being filled while the status
/// is ACTIVE (or INVALIDATED), else nullptr; it is owned by the capture until EndCapture.
struct CaptureInfo {
  CaptureStatus status = CaptureStatus::kNone;
  ModelRI* instance = nullptr;
};

/// Kinds of task, as listed by enumeration and dumps.
enum class TaskKind : uint8_t {
  kCopy,
  kMemset,
  kKernel,
  kEventRecord,
  kEventWait,
  kEventReset,
  kHostFunc,
  kConditional,
  kStreamSwitch,    // built instances: jump to another stream when a comparison holds
  kStreamActivate,  // built instances: start another stream in parallel
};

/// How a stream is bound to an instance being built (build.h): HEAD streams start at every
/// launch; DEFAULT streams only when a switch or activate task of the instance starts them.
enum class StreamBinding : uint8_t { kDefault, kHead };

/// The comparison of a stream switch: `*value <op> *rhs`.
enum class CompareOp : uint8_t {
  kEqual,
  kNotEqual,
  kGreater,
  kGreaterOrEqual,
  kLess,
  kLessOrEqual
};

/// The type both operands of a stream switch are read as.
enum class SwitchDataType : uint8_t { kInt32, kUint32, kInt64 };

/// Conditional tasks (scenario 2 of capture_semantics.md §7).
enum class ConditionalKind : uint8_t { kIf, kWhile, kSwitch };

/// A condition value owned by an instance. `value` points at a uint32 in device memory that
/// tasks of the instance (copies, memsets, kernels, host functions) may write; it lives as long
/// as the instance that made it.
struct ConditionHandle {
  uint32_t* value = nullptr;
  int index = -1;
  const ModelRI* owner = nullptr;
};

/// A group of tasks recorded between BeginTaskGroup and EndTaskGroup; names the instance
/// (borrowed) and the group's index in it.
struct TaskGroup {
  ModelRI* instance = nullptr;
  int index = -1;
};

/// One task of an instance's stream, as enumerated. `op` borrows from the prepared kernel
/// (kernels) and is empty for other kinds.
struct TaskInfo {
  uint32_t seq = 0;
  TaskKind kind = TaskKind::kCopy;
  absl::string_view op;
  int stream = 0;
  int group = -1;
};

/// DumpJson detail level.
enum class DumpFlags : uint32_t { kSummary = 0, kVerbose = 1 };

/// Event creation flags. kExternal: the event is seen across instance boundaries (an instance
/// records it for streams outside, or waits on a record made outside).
enum class EventFlags : uint32_t { kNone = 0, kExternal = 1 };

/// Memory accounting of one device.
struct MemoryStats {
  size_t device_in_use = 0;
  size_t device_peak = 0;
  size_t pinned_in_use = 0;
  size_t pinned_peak = 0;
  size_t pinned_cached = 0;  // pool blocks free for reuse
};

/// Lowercase names: "copy", "kernel", "event_record", ...
absl::string_view TaskKindName(TaskKind kind);
absl::string_view CopyKindName(CopyKind kind);
absl::string_view CaptureModeName(CaptureMode mode);
absl::string_view CaptureStatusName(CaptureStatus status);
absl::string_view ConditionalKindName(ConditionalKind kind);
absl::string_view CompareOpName(CompareOp op);              // "equal", "greater_or_equal", ...
absl::string_view SwitchDataTypeName(SwitchDataType type);  // "int32", "uint32", "int64"

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_RUNTIME_TYPES_H_
