#include "runtime/core/cpu/cpu_model_ri.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/cpu_stream.h"

namespace reprise::runtime::cpu {

uint64_t NextObjectId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

CpuModelRI::CpuModelRI(CpuDevice* device, CpuModelRI* parent)
    : device_(device),
      parent_(parent),
      data_(std::make_shared<RiData>(NextObjectId(), device, parent != nullptr)) {}

CpuModelRI::~CpuModelRI() {
  if (build_ == nullptr) return;
  // A build abandoned (or never unbound): its streams run eagerly again.
  std::lock_guard<std::mutex> lock(CaptureMutex());
  for (CaptureStreamState& state : build_->streams) {
    if (state.stream != nullptr && state.stream->capture_locked() == build_) {
      state.stream->DetachLocked();
    }
    state.stream = nullptr;
  }
  build_->ended = true;
  build_->instance = nullptr;
}

CpuModelRI* CpuModelRI::AddChild() {
  children_.push_back(std::make_unique<CpuModelRI>(device_, this));
  return children_.back().get();
}

bool CpuModelRI::AnyChildCapturing() const {
  for (const auto& child : children_) {
    if (child->capturing || child->AnyChildCapturing()) return true;
  }
  return false;
}

absl::Status CpuModelRI::CheckSealed(absl::string_view what) const {
  if (!sealed.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " of instance ", id(), ": the instance is still being captured or built"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuStream*> CpuModelRI::LaunchStream(Stream* stream,
                                                    std::vector<uint64_t>* tickets) {
  if (data_->child) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", id(), " is a conditional body; it runs only through its parent"));
  }
  RETURN_IF_ERROR(CheckSealed("execute"));
  auto* cpu_stream = dynamic_cast<CpuStream*>(stream);
  if (cpu_stream == nullptr || cpu_stream->device() != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("instance ", id(), " cannot run on a stream of another device"));
  }
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (cpu_stream->RoutedLocked()) {
      return absl::FailedPreconditionError(
          absl::StrCat("instance ", id(), " cannot be launched on stream ", cpu_stream->id(),
                       ", which is capturing, bound to an instance being built or has a task "
                       "update open"));
    }
  }
  // External records and waits bind now, in host order (event.h).
  for (const ExternalRef& ref : data_->externals) {
    const Task& task = data_->streams[ref.stream][ref.task];
    tickets->push_back(task.kind == TaskKind::kEventRecord ? task.target.event->IssueRecord()
                                                           : task.target.event->IssuedCount());
  }
  return cpu_stream;
}

absl::Status CpuModelRI::ExecuteAsync(Stream* stream) {
  std::vector<uint64_t> tickets;
  ASSIGN_OR_RETURN(CpuStream * cpu_stream, LaunchStream(stream, &tickets));
  return cpu_stream->EnqueueExecute(data_, std::move(tickets));
}

absl::Status CpuModelRI::Execute(Stream* stream) {
  std::vector<uint64_t> tickets;
  ASSIGN_OR_RETURN(CpuStream * cpu_stream, LaunchStream(stream, &tickets));
  return cpu_stream->ExecuteAndWait(data_, std::move(tickets));
}

absl::StatusOr<ConditionHandle> CpuModelRI::CreateCondition(uint32_t default_value,
                                                            bool assign_default) {
  std::lock_guard<std::mutex> lock(CaptureMutex());
  if (!capturing) {
    return absl::FailedPreconditionError(absl::StrCat(
        "instance ", id(), " is not being captured or built; conditions are made then"));
  }
  auto slot = std::make_unique<ConditionSlot>();
  slot->value = default_value;
  slot->default_value = default_value;
  slot->assign_default = assign_default;
  ConditionHandle handle{&slot->value, static_cast<int>(data_->conditions.size()), this};
  data_->conditions.push_back(std::move(slot));
  return handle;
}

size_t CpuModelRI::NumStreams() const {
  return sealed.load(std::memory_order_acquire) ? data_->streams.size() : 0;
}

absl::Status CpuModelRI::GetStreams(std::span<RiStreamInfo> out) const {
  RETURN_IF_ERROR(CheckSealed("stream list"));
  const size_t needed = data_->streams.size();
  if (out.size() < needed) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", id(), " has ", needed,
                                                   " streams: an array of ", out.size(),
                                                   " is too small, ", needed, " needed"));
  }
  for (size_t s = 0; s < needed; ++s) {
    out[s] = RiStreamInfo{static_cast<int>(s), data_->streams[s].size()};
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CpuModelRI::NumTasks(int stream) const {
  RETURN_IF_ERROR(CheckSealed("task count"));
  if (stream < 0 || static_cast<size_t>(stream) >= data_->streams.size()) {
    return absl::InvalidArgumentError(absl::StrCat("instance ", id(), " has no stream ", stream,
                                                   " (it has ", data_->streams.size(), ")"));
  }
  return data_->streams[stream].size();
}

absl::Status CpuModelRI::GetTasks(int stream, std::span<TaskInfo> out) const {
  ASSIGN_OR_RETURN(size_t needed, NumTasks(stream));
  if (out.size() < needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", stream, " of instance ", id(), " has ", needed,
                     " tasks: an array of ", out.size(), " is too small, ", needed, " needed"));
  }
  const std::vector<Task>& tasks = data_->streams[stream];
  for (size_t i = 0; i < needed; ++i) {
    const Task& task = tasks[i];
    TaskInfo info;
    info.seq = task.seq;
    info.kind = task.kind;
    if (task.kind == TaskKind::kKernel) info.op = task.target.kernel->op();
    info.stream = stream;
    info.group = task.group;
    out[i] = info;
  }
  return absl::OkStatus();
}

std::string CpuModelRI::DumpJson(DumpFlags flags) const {
  if (!sealed.load(std::memory_order_acquire)) {
    return absl::StrCat("{\"instance\": ", id(), ", \"state\": \"capturing\"}");
  }
  return DumpRiJson(*data_, flags == DumpFlags::kVerbose);
}

absl::Status CpuModelRI::SetTaskObserver(TaskObserver* observer) {
  if (data_->child) {
    return absl::FailedPreconditionError(absl::StrCat(
        "instance ", id(), " is a conditional body; set the observer on its top-level instance"));
  }
  data_->observer.store(observer, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace reprise::runtime::cpu
