// The instance JSON writer (capture_semantics.md §5), one for every backend, over an
// enumeration interface that each backend implements on its recorded data.
#ifndef REPRISE_RUNTIME_CORE_RI_JSON_H_
#define REPRISE_RUNTIME_CORE_RI_JSON_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"
#include "runtime/core/runtime_types.h"

namespace reprise::runtime {

class RiEnumeration;

/// One task as the writer reads it. Every pointer is borrowed for the duration of the dump; the
/// writer prints pointers, it never dereferences the buffers. Fields a kind does not use stay at
/// their defaults.
struct RiTaskView {
  uint32_t seq = 0;
  TaskKind kind = TaskKind::kCopy;
  int group = -1;  // task group index, -1 when none
  // Kernels: the op name (summary) and, for kVerbose, the bound pointers. `kernel` (may be
  // null) gives the outputs' dtypes and shapes and the workspace size.
  absl::string_view op;
  std::span<const void* const> inputs;
  std::span<const void* const> outputs;
  const void* workspace = nullptr;
  const PreparedKernel* kernel = nullptr;
  // Copies and memsets (src of a switch: its value pointer).
  CopyKind copy_kind = CopyKind::kDeviceToDevice;
  const void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  uint64_t value = 0;  // memset byte
  // Event record / wait / reset: an internal slot (>= 0) or the event object.
  bool external = false;
  int slot = -1;
  const void* event = nullptr;
  // Host functions.
  const void* user_data = nullptr;
  // Conditionals: kind, condition value and a view of each body (owned by this view).
  ConditionalKind conditional = ConditionalKind::kIf;
  const void* condition = nullptr;
  std::vector<std::unique_ptr<RiEnumeration>> bodies;
  // Stream switch / activate (build.h): the target stream's index; a switch compares *src with
  // *rhs as `dtype`.
  int target_stream = -1;
  CompareOp compare = CompareOp::kEqual;
  SwitchDataType dtype = SwitchDataType::kInt32;
  const void* rhs = nullptr;
};

/// A condition of an instance, as listed under "conditions".
struct RiConditionView {
  uint32_t default_value = 0;
  bool assign_default = false;
};

/// A task group, as listed under "groups": `count` tasks from task `first` of stream `stream`.
struct RiGroupView {
  int stream = 0;
  uint32_t first = 0;
  uint32_t count = 0;
};

/// What a backend shows of one instance (top-level or conditional body) to the writer. Made by
/// the backend for one dump; must not outlive the instance it reads. Not thread-safe: the
/// instance must not be changed (captured into, updated) during the dump.
class RiEnumeration {
 public:
  virtual ~RiEnumeration() = default;

  virtual uint64_t id() const = 0;
  /// "cpu", "cuda", ...
  virtual absl::string_view backend() const = 0;
  /// A conditional body (runs only through its parent).
  virtual bool child() const = 0;
  /// Made by BuildBegin .. BuildEnd (build.h) rather than captured.
  virtual bool built() const { return false; }

  virtual size_t NumStreams() const = 0;
  /// Built instances: the stream was bound as HEAD (starts at every launch).
  virtual bool HeadStream(int /*stream*/) const { return false; }
  virtual size_t NumTasks(int stream) const = 0;
  virtual RiTaskView Task(int stream, size_t index) const = 0;

  virtual size_t NumConditions() const { return 0; }
  virtual RiConditionView Condition(size_t /*index*/) const { return RiConditionView{}; }
  virtual size_t NumGroups() const { return 0; }
  virtual RiGroupView Group(size_t /*index*/) const { return RiGroupView{}; }

  /// Backend-specific members, each written as `, "name": value`: after a task's own members,
  /// and after the instance's "streams" (e.g. CUDA's graph).
  virtual void AppendTaskExtras(int /*stream*/, size_t /*index*/, std::string* /*out*/) const {}
  virtual void AppendInstanceExtras(std::string* /*out*/) const {}
};

/// The instance as JSON (always valid JSON; DumpFlags semantics in model_ri.h).
std::string WriteRiJson(const RiEnumeration& instance, DumpFlags flags);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_RI_JSON_H_
