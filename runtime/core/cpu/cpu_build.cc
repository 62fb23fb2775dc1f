// Built instances on the CPU backend (runtime/core/build.h): binding streams, stream switch and
// activate tasks, and BuildEnd's checks. Recording reuses the capture path (a build is a
// CaptureState with `built` set, never registered with the capture registry); execution is
// RunBuiltInstance (executor.cc).
#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/cpu/cpu_model_ri.h"
#include "runtime/core/cpu/cpu_stream.h"

namespace reprise::runtime::cpu {

absl::StatusOr<std::unique_ptr<ModelRI>> CpuDevice::BuildBegin() {
  auto instance = std::make_unique<CpuModelRI>(this, nullptr);
  instance->StartBuild();
  return std::unique_ptr<ModelRI>(std::move(instance));
}

void CpuModelRI::StartBuild() {
  auto build = std::make_shared<CaptureState>();
  build->id = NextCaptureId();
  build->origin = absl::StrCat("instance ", id());
  build->mode = CaptureMode::kRelaxed;
  build->thread = std::this_thread::get_id();
  build->built = true;
  build->instance = this;
  build->data = data_.get();
  data_->built = true;
  data_->streams.clear();  // streams come from BindStream
  std::lock_guard<std::mutex> lock(CaptureMutex());
  capturing = true;
  build_ = std::move(build);
}

void CpuStream::AttachLocked(std::shared_ptr<CaptureState> build, int index) {
  capture_ = std::move(build);
  capture_index_ = index;
  routed_.store(true, std::memory_order_release);
}

void CpuStream::DetachLocked() {
  capture_.reset();
  capture_index_ = 0;
  routed_.store(update_ != nullptr, std::memory_order_release);
}

absl::StatusOr<int> CpuModelRI::BoundIndexLocked(Stream* stream, absl::string_view what) const {
  auto* cpu_stream = dynamic_cast<CpuStream*>(stream);
  if (build_ == nullptr || cpu_stream == nullptr || cpu_stream->capture_locked() != build_) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": stream ", stream == nullptr ? 0 : stream->id(), " is not bound to instance ", id(),
        build_ == nullptr ? " (it was not made by BuildBegin)" : ""));
  }
  return cpu_stream->capture_index_locked();
}

absl::Status CpuModelRI::BindStream(Stream* stream, StreamBinding binding) {
  auto* cpu_stream = dynamic_cast<CpuStream*>(stream);
  if (cpu_stream == nullptr || cpu_stream->device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat("bind to instance ", id(), ": the stream is ",
                                                   "null or not a stream of ", device_->name()));
  }
  if (cpu_stream->is_default()) {
    return absl::InvalidArgumentError(absl::StrCat("bind to instance ", id(), ": stream ",
                                                   stream->id(), " is the default stream of ",
                                                   device_->name(), "; it cannot be bound"));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (build_ == nullptr || build_->ended) {
    return absl::FailedPreconditionError(
        absl::StrCat("bind stream ", stream->id(), ": instance ", id(),
                     " is not being built (BuildBegin .. BuildEnd)"));
  }
  if (const auto& current = cpu_stream->capture_locked(); current != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bind stream ", stream->id(), " to instance ", id(), ": the stream is already ",
        current->built ? absl::StrCat("bound to ", current->origin)
                       : absl::StrCat("capturing (", DescribeCapture(*current), ")")));
  }
  if (cpu_stream->update_open_locked()) {
    return absl::FailedPreconditionError(
        absl::StrCat("bind stream ", stream->id(), ": it has a task update open"));
  }
  const int index = static_cast<int>(build_->streams.size());
  build_->streams.push_back(CaptureStreamState{cpu_stream, {}, -1, false});
  data_->streams.emplace_back();
  data_->head.push_back(binding == StreamBinding::kHead ? 1 : 0);
  cpu_stream->AttachLocked(build_, index);
  return absl::OkStatus();
}

absl::Status CpuModelRI::EndTask(Stream* stream) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  ASSIGN_OR_RETURN(const int index, BoundIndexLocked(stream, "end task"));
  CaptureStreamState& state = build_->streams[index];
  if (build_->ended || state.task_end) {
    return absl::FailedPreconditionError(absl::StrCat("end task: stream ", stream->id(),
                                                      " of instance ", id(), " was already ended"));
  }
  if (state.open_group >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "end task: stream ", stream->id(), " still has task group ", state.open_group, " open"));
  }
  state.task_end = true;
  return absl::OkStatus();
}

absl::Status CpuModelRI::UnbindStream(Stream* stream) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  ASSIGN_OR_RETURN(const int index, BoundIndexLocked(stream, "unbind"));
  if (!build_->ended) {
    return absl::FailedPreconditionError(
        absl::StrCat("unbind stream ", stream->id(), ": instance ", id(),
                     " is still being built; call BuildEnd first (or destroy the instance)"));
  }
  build_->streams[index].stream = nullptr;
  static_cast<CpuStream*>(stream)->DetachLocked();
  return absl::OkStatus();
}

absl::Status CpuModelRI::BuildEnd() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (build_ == nullptr || build_->ended) {
    return absl::FailedPreconditionError(
        absl::StrCat("build end: instance ", id(), " is not being built"));
  }
  const std::string what = absl::StrCat("build end of instance ", id());
  if (build_->status != CaptureStatus::kActive) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the build was invalidated (", build_->invalid_reason, ")"));
  }
  if (build_->streams.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": no stream is bound"));
  }
  bool any_head = false;
  for (size_t s = 0; s < build_->streams.size(); ++s) {
    const CaptureStreamState& state = build_->streams[s];
    any_head = any_head || data_->head[s] != 0;
    if (!state.task_end) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": stream ", state.stream == nullptr ? 0 : state.stream->id(),
                       " (index ", s, ") was not ended with EndTask"));
    }
  }
  if (!any_head) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": no stream is bound as HEAD, so nothing would start"));
  }
  if (AnyChildCapturing()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": a conditional body is still being captured"));
  }
  for (size_t g = 0; g < data_->groups.size(); ++g) {
    if (data_->groups[g].open) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": task group ", g, " was not ended"));
    }
  }
  RETURN_IF_ERROR(CheckStreamGraphLocked());
  build_->ended = true;
  capturing = false;
  data_->Seal();
  sealed.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status CpuModelRI::CheckStreamGraphLocked() const {
  const size_t n = data_->streams.size();
  // Edges of the stream graph: (target, is_switch) per switch / activate task.
  std::vector<std::vector<std::pair<int, bool>>> edges(n);
  for (size_t s = 0; s < n; ++s) {
    for (const Task& task : data_->streams[s]) {
      if (task.kind == TaskKind::kStreamSwitch || task.kind == TaskKind::kStreamActivate) {
        edges[s].emplace_back(static_cast<int>(task.aux), task.kind == TaskKind::kStreamSwitch);
      }
    }
  }
  auto name = [this](size_t s) {
    const CpuStream* stream = build_->streams[s].stream;
    return absl::StrCat("stream ", stream == nullptr ? 0 : stream->id(), " (index ", s, ")");
  };
  // Every stream must be reachable from a HEAD stream.
  std::vector<uint8_t> reached(n, 0);
  std::vector<int> pending;
  for (size_t s = 0; s < n; ++s) {
    if (data_->head[s]) {
      reached[s] = 1;
      pending.push_back(static_cast<int>(s));
    }
  }
  while (!pending.empty()) {
    const int s = pending.back();
    pending.pop_back();
    for (const auto& [target, is_switch] : edges[s]) {
      if (!reached[target]) {
        reached[target] = 1;
        pending.push_back(target);
      }
    }
  }
  for (size_t s = 0; s < n; ++s) {
    if (reached[s]) continue;
    bool has_switch = false;
    for (const auto& edge : edges[s]) has_switch = has_switch || edge.second;
    return absl::InvalidArgumentError(absl::StrCat(
        "build end of instance ", id(), ": ", name(s), " is bound as DEFAULT and never starts: ",
        "no HEAD stream reaches it through a switch or activate task, so its ",
        data_->streams[s].size(), " tasks", has_switch ? " (a stream switch among them)" : "",
        " would never run"));
  }
  // No cycles: depth-first search with colours (0 new, 1 on the path, 2 done).
  std::vector<uint8_t> colour(n, 0);
  std::vector<int> path;
  std::vector<std::pair<int, size_t>> stack;  // (stream, next edge)
  for (size_t root = 0; root < n; ++root) {
    if (colour[root] != 0) continue;
    stack.emplace_back(static_cast<int>(root), 0);
    colour[root] = 1;
    path.push_back(static_cast<int>(root));
    while (!stack.empty()) {
      auto& [s, next] = stack.back();
      if (next == edges[s].size()) {
        colour[s] = 2;
        path.pop_back();
        stack.pop_back();
        continue;
      }
      const int target = edges[s][next++].first;
      if (colour[target] == 1) {
        std::vector<std::string> names;
        for (auto it = std::find(path.begin(), path.end(), target); it != path.end(); ++it) {
          names.push_back(name(*it));
        }
        names.push_back(name(target));
        return absl::InvalidArgumentError(
            absl::StrCat("build end of instance ", id(), ": the switch / activate tasks of ",
                         absl::StrJoin(names, " -> "),
                         " form a cycle, which could never end; a built instance cannot loop "
                         "through its streams (loop with a WHILE conditional task instead)"));
      }
      if (colour[target] == 0) {
        colour[target] = 1;
        path.push_back(target);
        stack.emplace_back(target, 0);
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The build `stream` records into, and the index of `target` in it. Caller holds
// CaptureMutex().
absl::StatusOr<int> TargetIndexLocked(const CpuStream& stream, Stream* target,
                                      absl::string_view what) {
  const std::shared_ptr<CaptureState>& build = stream.capture_locked();
  if (build == nullptr || !build->built) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " on stream ", stream.id(),
                     ": the stream is not bound to an instance being built (BindStream); ",
                     "stream switches and activations exist only in built instances"));
  }
  auto* cpu_target = dynamic_cast<CpuStream*>(target);
  if (cpu_target == nullptr || cpu_target->capture_locked() != build) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " on stream ", stream.id(), ": target stream ",
                     target == nullptr ? 0 : target->id(), " is not bound to ", build->origin));
  }
  return cpu_target->capture_index_locked();
}

}  // namespace

absl::Status CpuStream::SwitchStream(const void* value, CompareOp compare, const void* rhs,
                                     SwitchDataType dtype, Stream* true_stream) {
  if (value == nullptr || rhs == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream switch on stream ", id_, ": null value or right-hand side pointer"));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  ASSIGN_OR_RETURN(const int target, TargetIndexLocked(*this, true_stream, "stream switch"));
  Task task;
  task.kind = TaskKind::kStreamSwitch;
  task.sub = PackSwitch(compare, dtype);
  task.src = value;
  task.target.none = rhs;
  task.aux = static_cast<uint64_t>(target);
  return RecordLocked(task, {});
}

absl::Status CpuStream::ActiveStream(Stream* target_stream) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  ASSIGN_OR_RETURN(const int target, TargetIndexLocked(*this, target_stream, "stream activate"));
  Task task;
  task.kind = TaskKind::kStreamActivate;
  task.aux = static_cast<uint64_t>(target);
  return RecordLocked(task, {});
}

}  // namespace reprise::runtime::cpu
