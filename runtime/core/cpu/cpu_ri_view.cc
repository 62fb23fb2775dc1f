// The CPU backend's side of the instance JSON writer (runtime/core/ri_json.h): a view over an
// instance's recorded data.
#include <memory>
#include <string>

#include "runtime/core/cpu/cpu_model_ri.h"
#include "runtime/core/ri_json.h"

namespace reprise::runtime::cpu {
namespace {

class CpuRiView final : public RiEnumeration {
 public:
  explicit CpuRiView(const RiData& data) : data_(data) {}

  uint64_t id() const override { return data_.id; }
  absl::string_view backend() const override { return "cpu"; }
  bool child() const override { return data_.child; }
  bool built() const override { return data_.built; }
  size_t NumStreams() const override { return data_.streams.size(); }
  bool HeadStream(int stream) const override {
    return static_cast<size_t>(stream) < data_.head.size() && data_.head[stream] != 0;
  }
  size_t NumTasks(int stream) const override { return data_.streams[stream].size(); }

  RiTaskView Task(int stream, size_t index) const override {
    const cpu::Task& task = data_.streams[stream][index];
    RiTaskView view;
    view.seq = task.seq;
    view.kind = task.kind;
    view.group = task.group;
    switch (task.kind) {
      case TaskKind::kKernel: {
        const auto* args = reinterpret_cast<const void* const*>(data_.ptrs.data() + task.args);
        view.op = task.target.kernel->op();
        view.kernel = task.target.kernel;
        view.inputs = {args, task.num_inputs};
        view.outputs = {args + task.num_inputs, task.num_outputs};
        view.workspace = args[task.num_inputs + task.num_outputs];
        break;
      }
      case TaskKind::kCopy:
      case TaskKind::kMemset:
        view.copy_kind = static_cast<CopyKind>(task.sub);
        view.dst = task.dst;
        view.src = task.src;
        view.bytes = task.bytes;
        view.value = task.aux;
        break;
      case TaskKind::kEventRecord:
      case TaskKind::kEventWait:
      case TaskKind::kEventReset:
        view.external = task.sub == kExternalEvent;
        if (task.sub == kSlotEvent) view.slot = static_cast<int>(task.aux);
        view.event = task.target.event;
        break;
      case TaskKind::kHostFunc:
        view.user_data = task.dst;
        break;
      case TaskKind::kConditional: {
        const Conditional& conditional = data_.conditionals[task.aux];
        view.conditional = conditional.kind;
        view.condition = conditional.value;
        for (const auto& body : conditional.bodies) {
          view.bodies.push_back(std::make_unique<CpuRiView>(*body));
        }
        break;
      }
      case TaskKind::kStreamSwitch:
        view.compare = SwitchCompare(task);
        view.dtype = SwitchType(task);
        view.src = task.src;
        view.rhs = task.target.none;
        view.target_stream = static_cast<int>(task.aux);
        break;
      case TaskKind::kStreamActivate:
        view.target_stream = static_cast<int>(task.aux);
        break;
    }
    return view;
  }

  size_t NumConditions() const override { return data_.conditions.size(); }
  RiConditionView Condition(size_t index) const override {
    const ConditionSlot& slot = *data_.conditions[index];
    return RiConditionView{slot.default_value, slot.assign_default};
  }
  size_t NumGroups() const override { return data_.groups.size(); }
  RiGroupView Group(size_t index) const override {
    const GroupRange& range = data_.groups[index];
    return RiGroupView{range.stream, range.first, range.count};
  }

 private:
  const RiData& data_;
};

}  // namespace

std::string DumpRiJson(const RiData& data, bool verbose) {
  return WriteRiJson(CpuRiView(data), verbose ? DumpFlags::kVerbose : DumpFlags::kSummary);
}

}  // namespace reprise::runtime::cpu
