// CpuStream: capture, event tasks (capture-aware), conditionals, task groups and updates.
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/cpu_model_ri.h"
#include "runtime/core/cpu/cpu_stream.h"

namespace reprise::runtime::cpu {
namespace {

absl::StatusOr<CpuEvent*> AsCpuEvent(Event* event, uint64_t stream_id) {
  auto* cpu_event = dynamic_cast<CpuEvent*>(event);
  if (cpu_event == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", stream_id, ": the event is null or not a cpu event"));
  }
  return cpu_event;
}

}  // namespace

absl::Status CpuStream::RecordLocked(Task task, std::span<void* const> ptrs) {
  CaptureState& capture = *capture_;
  if (capture.status != CaptureStatus::kActive) {
    return absl::FailedPreconditionError(absl::StrCat(DescribeCapture(capture), " is invalidated (",
                                                      capture.invalid_reason,
                                                      "); the task was not recorded"));
  }
  CaptureStreamState& state = capture.streams[capture_index_];
  if (capture.built && (capture.ended || state.task_end)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stream ", id_, " is bound to ", capture.origin, ", whose ",
        capture.ended ? "build has ended; unbind the stream (UnbindStream) to use it eagerly"
                      : "task list on this stream was closed by EndTask",
        "; the task was not recorded"));
  }
  RiData& data = *capture.data;
  std::vector<Task>& tasks = data.streams[capture_index_];
  task.seq = static_cast<uint32_t>(tasks.size());
  task.group = state.open_group;
  if (task.kind == TaskKind::kKernel) {
    task.args = static_cast<uint32_t>(data.ptrs.size());
    data.ptrs.insert(data.ptrs.end(), ptrs.begin(), ptrs.end());
  }
  tasks.push_back(task);
  if (state.clock.size() <= static_cast<size_t>(capture_index_)) {
    state.clock.resize(capture_index_ + 1, 0);
  }
  state.clock[capture_index_] = static_cast<uint32_t>(tasks.size());
  return absl::OkStatus();
}

absl::Status CpuStream::BeginCapture(CaptureMode mode) {
  if (is_default_) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, " is the default stream of ",
                                                   device_->name(), "; it cannot capture"));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is already capturing (", DescribeCapture(*capture_), ")"));
  }
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " has a task update open; it cannot capture"));
  }
  auto capture = std::make_shared<CaptureState>();
  capture->id = NextObjectId();
  capture->origin = absl::StrCat("stream ", id_);
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->owned_instance = std::make_unique<CpuModelRI>(device_, nullptr);
  capture->instance = capture->owned_instance.get();
  capture->instance->capturing = true;
  capture->data = capture->instance->data();
  capture->streams.push_back(CaptureStreamState{this, {0}, -1});
  capture_ = capture;
  capture_index_ = 0;
  routed_.store(true, std::memory_order_release);
  AddActiveCapture(std::move(capture));
  return absl::OkStatus();
}

absl::Status CpuStream::BeginBodyCapture(ModelRI* body, CaptureMode mode) {
  if (is_default_) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, " is the default stream of ",
                                                   device_->name(), "; it cannot capture"));
  }
  auto* child = dynamic_cast<CpuModelRI*>(body);
  if (child == nullptr || child->parent() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_, ": body capture needs a conditional body instance"));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is already capturing (", DescribeCapture(*capture_), ")"));
  }
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " has a task update open; it cannot capture"));
  }
  if (child->ever_captured) {
    return absl::FailedPreconditionError(
        absl::StrCat("body instance ", child->id(), " was already captured"));
  }
  if (!child->parent()->capturing) {
    return absl::FailedPreconditionError(absl::StrCat("body instance ", child->id(),
                                                      ": its parent ", child->parent()->id(),
                                                      " is no longer being captured"));
  }
  auto capture = std::make_shared<CaptureState>();
  capture->id = NextObjectId();
  capture->origin = absl::StrCat("stream ", id_);
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->body = true;
  capture->instance = child;
  child->capturing = true;
  child->ever_captured = true;
  capture->data = child->data();
  capture->streams.push_back(CaptureStreamState{this, {0}, -1});
  capture_ = capture;
  capture_index_ = 0;
  routed_.store(true, std::memory_order_release);
  AddActiveCapture(std::move(capture));
  return absl::OkStatus();
}

absl::Status CpuStream::FinishCaptureLocked(bool body) {
  if (capture_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("stream ", id_, " is not capturing"));
  }
  if (capture_->built) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stream ", id_, " is bound to ", capture_->origin, "; a build ends with BuildEnd"));
  }
  if (capture_index_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat("stream ", id_, " was forked into ",
                                                      DescribeCapture(*capture_),
                                                      "; end the capture on its origin stream"));
  }
  if (capture_->body != body) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is in ", DescribeCapture(*capture_), "; end it with ",
                     capture_->body ? "EndBodyCapture" : "EndCapture"));
  }
  std::shared_ptr<CaptureState> capture = capture_;
  if (capture->mode != CaptureMode::kRelaxed && capture->thread != std::this_thread::get_id()) {
    return absl::FailedPreconditionError(
        absl::StrCat("end of ", DescribeCapture(*capture),
                     " called from the wrong thread (not the one that began it); the capture "
                     "goes on"));
  }
  if (capture->instance->AnyChildCapturing()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "end of ", DescribeCapture(*capture), ": a conditional body is still being captured"));
  }
  // From here on the capture ends, whatever the outcome.
  RemoveActiveCapture(capture.get());
  capture->ended = true;
  capture->instance->capturing = false;
  for (CaptureStreamState& state : capture->streams) {
    if (state.stream == nullptr) continue;
    state.stream->capture_.reset();
    state.stream->capture_index_ = 0;
    state.stream->routed_.store(state.stream->update_ != nullptr, std::memory_order_release);
  }
  const std::string description = DescribeCapture(*capture);
  if (capture->status == CaptureStatus::kInvalidated) {
    return absl::FailedPreconditionError(absl::StrCat(
        description, " was invalidated (", capture->invalid_reason, "); no instance was made"));
  }
  RiData& data = *capture->data;
  const std::vector<uint32_t>& origin_clock = capture->streams[0].clock;
  for (size_t s = 1; s < data.streams.size(); ++s) {
    const uint32_t joined = s < origin_clock.size() ? origin_clock[s] : 0;
    if (joined < data.streams[s].size()) {
      const CpuStream* stream = capture->streams[s].stream;
      return absl::FailedPreconditionError(
          absl::StrCat(description, ": stream ", stream == nullptr ? 0 : stream->id(),
                       " forked into the capture has not rejoined the origin stream (", joined,
                       " of ", data.streams[s].size(), " tasks joined); no instance was made"));
    }
  }
  for (size_t g = 0; g < data.groups.size(); ++g) {
    if (data.groups[g].open) {
      return absl::FailedPreconditionError(
          absl::StrCat(description, ": task group ", g, " was not ended; no instance was made"));
    }
  }
  data.Seal();
  capture->instance->sealed.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelRI>> CpuStream::EndCapture() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  std::shared_ptr<CaptureState> capture = capture_;
  absl::Status status = FinishCaptureLocked(/*body=*/false);
  if (!status.ok()) {
    // An ended capture that failed frees its instance now (events may keep the state alive).
    if (capture != nullptr && capture->ended) capture->owned_instance.reset();
    return status;
  }
  return std::unique_ptr<ModelRI>(std::move(capture->owned_instance));
}

absl::Status CpuStream::EndBodyCapture() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  return FinishCaptureLocked(/*body=*/true);
}

CaptureInfo CpuStream::GetCaptureInfo() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr) return CaptureInfo{};
  return CaptureInfo{capture_->status, capture_->instance};
}

absl::Status CpuStream::RecordEvent(Event* event) {
  ASSIGN_OR_RETURN(CpuEvent * cpu_event, AsCpuEvent(event, id_));
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    RiData& data = *capture_->data;
    Task task;
    task.kind = TaskKind::kEventRecord;
    task.target.event = cpu_event;
    if (cpu_event->external()) {
      task.sub = kExternalEvent;
      task.aux = data.externals.size();
      RETURN_IF_ERROR(RecordLocked(task, {}));
      data.externals.push_back(ExternalRef{
          capture_index_, static_cast<uint32_t>(data.streams[capture_index_].size() - 1)});
      return absl::OkStatus();
    }
    task.sub = kSlotEvent;
    task.aux = data.num_slots;
    RETURN_IF_ERROR(RecordLocked(task, {}));
    cpu_event->binding =
        EventCaptureBinding{capture_, data.num_slots, capture_->streams[capture_index_].clock};
    ++data.num_slots;
    return absl::OkStatus();
  }
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, ": event tasks cannot be part of a task update"));
  }
  cpu_event->binding = EventCaptureBinding{};  // an eager record replaces a captured one
  QueueItem item;
  item.task.kind = TaskKind::kEventRecord;
  item.task.sub = kEagerEvent;
  item.task.target.event = cpu_event;
  item.task.aux = cpu_event->IssueRecord();
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status CpuStream::WaitEvent(Event* event) {
  ASSIGN_OR_RETURN(CpuEvent * cpu_event, AsCpuEvent(event, id_));
  std::lock_guard<std::mutex> lock(CaptureMutex());
  const EventCaptureBinding& binding = cpu_event->binding;
  CaptureState* bound =
      binding.capture != nullptr && !binding.capture->ended ? binding.capture.get() : nullptr;
  Task task;
  task.kind = TaskKind::kEventWait;
  task.target.event = cpu_event;
  if (capture_ != nullptr) {
    if (bound == capture_.get()) {
      task.sub = kSlotEvent;
      task.aux = binding.slot;
      RETURN_IF_ERROR(RecordLocked(task, {}));
      MergeClock(&capture_->streams[capture_index_].clock, binding.clock);
      return absl::OkStatus();
    }
    const std::string description = DescribeCapture(*capture_);
    if (bound != nullptr) {
      InvalidateCapture(capture_.get(), "wait on an event recorded in another capture");
      return absl::FailedPreconditionError(absl::StrCat(
          "stream ", id_, " (", description,
          "): waiting on an event recorded in another capture; the capture is now invalidated"));
    }
    if (cpu_event->external()) {
      RiData& data = *capture_->data;
      task.sub = kExternalEvent;
      task.aux = data.externals.size();
      RETURN_IF_ERROR(RecordLocked(task, {}));
      data.externals.push_back(ExternalRef{
          capture_index_, static_cast<uint32_t>(data.streams[capture_index_].size() - 1)});
      return absl::OkStatus();
    }
    InvalidateCapture(capture_.get(), "wait on an event from outside the capture");
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " (", description,
                     "): waiting on an event not recorded in this capture needs an event made with "
                     "EventFlags::kExternal; the capture is now invalidated"));
  }
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, ": event tasks cannot be part of a task update"));
  }
  if (bound != nullptr && bound->built) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " waits on an event recorded in ", bound->origin,
                     " being built; bind the stream to the instance (BindStream) instead"));
  }
  if (bound != nullptr) {
    // Fork: this stream joins the capture in which the event was recorded.
    if (is_default_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stream ", id_, " is a default stream; it cannot join ", DescribeCapture(*bound)));
    }
    capture_ = binding.capture;
    capture_index_ = static_cast<int>(bound->streams.size());
    bound->streams.push_back(CaptureStreamState{this, binding.clock, -1});
    bound->data->streams.emplace_back();
    routed_.store(true, std::memory_order_release);
    task.sub = kSlotEvent;
    task.aux = binding.slot;
    return RecordLocked(task, {});
  }
  QueueItem item;
  item.task = task;
  item.task.sub = kEagerEvent;
  item.task.aux = cpu_event->IssuedCount();
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status CpuStream::ResetEvent(Event* event) {
  ASSIGN_OR_RETURN(CpuEvent * cpu_event, AsCpuEvent(event, id_));
  std::lock_guard<std::mutex> lock(CaptureMutex());
  Task task;
  task.kind = TaskKind::kEventReset;
  task.target.event = cpu_event;
  if (capture_ != nullptr) return RecordLocked(task, {});
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, ": event tasks cannot be part of a task update"));
  }
  QueueItem item;
  item.task = task;
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ModelRI*>> CpuStream::AddConditional(ConditionalKind kind,
                                                                ConditionHandle condition,
                                                                int num_bodies) {
  const bool count_ok = kind == ConditionalKind::kIf      ? num_bodies == 1 || num_bodies == 2
                        : kind == ConditionalKind::kWhile ? num_bodies == 1
                                                          : num_bodies >= 1;
  if (!count_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stream ", id_, ": a ", ConditionalKindName(kind), " cannot have ", num_bodies, " bodies"));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is not capturing; conditional tasks are only recorded"));
  }
  if (capture_->status != CaptureStatus::kActive) {
    return absl::FailedPreconditionError(
        absl::StrCat(DescribeCapture(*capture_), " is invalidated; the task was not recorded"));
  }
  // The condition must belong to the instance being filled or to one of its ancestors.
  bool owned = false;
  for (const CpuModelRI* ri = capture_->instance; ri != nullptr; ri = ri->parent()) {
    if (condition.owner == ri && condition.index >= 0 &&
        static_cast<size_t>(condition.index) < ri->data()->conditions.size() &&
        condition.value == &ri->data()->conditions[condition.index]->value) {
      owned = true;
    }
  }
  if (!owned) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_, ": condition ", condition.index,
                     " does not belong to the instance being captured or to one of its parents"));
  }
  RiData& data = *capture_->data;
  Conditional conditional;
  conditional.kind = kind;
  conditional.value = condition.value;
  std::vector<ModelRI*> bodies;
  for (int i = 0; i < num_bodies; ++i) {
    CpuModelRI* child = capture_->instance->AddChild();
    conditional.bodies.push_back(child->shared_data());
    bodies.push_back(child);
  }
  Task task;
  task.kind = TaskKind::kConditional;
  task.sub = static_cast<uint8_t>(kind);
  task.aux = data.conditionals.size();
  RETURN_IF_ERROR(RecordLocked(task, {}));
  data.conditionals.push_back(std::move(conditional));
  return bodies;
}

absl::Status CpuStream::BeginTaskGroup() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is not capturing; task groups are made while capturing"));
  }
  CaptureStreamState& state = capture_->streams[capture_index_];
  if (state.open_group >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " already has task group ", state.open_group, " open"));
  }
  RiData& data = *capture_->data;
  state.open_group = static_cast<int>(data.groups.size());
  data.groups.push_back(GroupRange{
      capture_index_, static_cast<uint32_t>(data.streams[capture_index_].size()), 0, true});
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> CpuStream::EndTaskGroup() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ == nullptr || capture_->streams[capture_index_].open_group < 0) {
    return absl::FailedPreconditionError(absl::StrCat("stream ", id_, " has no task group open"));
  }
  CaptureStreamState& state = capture_->streams[capture_index_];
  RiData& data = *capture_->data;
  GroupRange& range = data.groups[state.open_group];
  range.count = static_cast<uint32_t>(data.streams[capture_index_].size()) - range.first;
  range.open = false;
  TaskGroup group{capture_->instance, state.open_group};
  state.open_group = -1;
  return group;
}

absl::Status CpuStream::BeginTaskUpdate(TaskGroup group) {
  auto* ri = dynamic_cast<CpuModelRI*>(group.instance);
  if (ri == nullptr || !ri->sealed.load(std::memory_order_acquire)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_,
                     ": task update of a group of an instance that is missing "
                     "or still being captured"));
  }
  if (group.index < 0 || static_cast<size_t>(group.index) >= ri->data()->groups.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_, ": instance ", ri->id(), " has no task group ", group.index));
  }
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " is capturing; a task update needs a stream that is not"));
  }
  if (update_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", id_, " already has a task update open"));
  }
  update_ = std::make_unique<UpdateBatch>();
  update_->ri = ri->shared_data();
  update_->instance_id = ri->id();
  update_->group = group.index;
  routed_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status CpuStream::EndTaskUpdate() {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (update_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("stream ", id_, " has no task update open"));
  }
  std::shared_ptr<UpdateBatch> batch(std::move(update_));
  routed_.store(false, std::memory_order_release);
  const RiData& ri = *batch->ri;
  const GroupRange& range = ri.groups[batch->group];
  const std::string what =
      absl::StrCat("task update of group ", batch->group, " of instance ", batch->instance_id);
  if (batch->tasks.size() != range.count) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", batch->tasks.size(),
                                                   " tasks given, the group has ", range.count,
                                                   "; the instance is unchanged"));
  }
  for (uint32_t i = 0; i < range.count; ++i) {
    const Task& old = ri.streams[range.stream][range.first + i];
    const Task& replacement = batch->tasks[i];
    if (old.kind != replacement.kind || old.num_inputs != replacement.num_inputs ||
        old.num_outputs != replacement.num_outputs) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": task ", i, " is a ", TaskKindName(replacement.kind), " with ",
                       replacement.num_inputs, "+", replacement.num_outputs,
                       " arguments, the group's is a ", TaskKindName(old.kind), " with ",
                       old.num_inputs, "+", old.num_outputs, "; the instance is unchanged"));
    }
  }
  QueueItem item;
  item.kind = ItemKind::kApplyUpdate;
  item.update = std::move(batch);
  Enqueue(std::move(item));
  return absl::OkStatus();
}

}  // namespace reprise::runtime::cpu
