// CpuStream: the worker, the queue and the eager paths. Capture paths: cpu_stream_capture.cc.
#include "runtime/core/cpu/cpu_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/cpu_device.h"
#include "runtime/core/cpu/cpu_model_ri.h"

namespace reprise::runtime::cpu {

CpuStream::CpuStream(CpuDevice* device, bool is_default)
    : device_(device), id_(NextObjectId()), is_default_(is_default) {}

absl::StatusOr<std::unique_ptr<CpuStream>> CpuStream::Create(CpuDevice* device, bool is_default) {
  std::unique_ptr<CpuStream> stream(new CpuStream(device, is_default));
  stream->worker_ = std::thread([raw = stream.get()] { raw->WorkerLoop(); });
  device->RegisterStream(stream.get());
  return stream;
}

CpuStream::~CpuStream() {
  device_->UnregisterStream(this);
  {
    // A capture this stream takes part in cannot be completed any more.
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (capture_ != nullptr) {
      std::shared_ptr<CaptureState> capture = std::move(capture_);
      InvalidateCapture(capture.get(), absl::StrCat("stream ", id_, " was destroyed"));
      capture->streams[capture_index_].stream = nullptr;
      if (capture_index_ == 0 && !capture->built) {
        // The origin is gone: nobody can end the capture, so it ends here (no instance).
        RemoveActiveCapture(capture.get());
        capture->ended = true;
        capture->instance->capturing = false;
        for (CaptureStreamState& state : capture->streams) {
          if (state.stream == nullptr) continue;
          state.stream->capture_.reset();
          state.stream->routed_.store(state.stream->update_ != nullptr);
        }
        capture->owned_instance.reset();
      }
    }
    update_.reset();
  }
  cancel_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

Device* CpuStream::device() const { return device_; }

void CpuStream::WorkerLoop() {
  while (true) {
    {
      QueueItem item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [this] { return stop_ || (count_ > 0 && !inline_run_); });
        if (count_ == 0) return;  // stopping, and everything queued has run
        item = std::move(ring_[head_]);
        head_ = (head_ + 1) % ring_.size();
        --count_;
      }
      RunItem(item);
    }  // the item (and any instance it holds) is released before it counts as done
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) idle_cv_.notify_all();
  }
}

RunEnv CpuStream::MakeRunEnv() {
  RunEnv env;
  env.sink.failed = &failed_;
  env.sink.mu = &error_mu_;
  env.sink.error = &error_;
  env.sink.cancel = &cancel_;
  env.stream_id = id_;
  return env;
}

void CpuStream::RunItem(QueueItem& item) {
  RunEnv env = MakeRunEnv();
  switch (item.kind) {
    case ItemKind::kTask:
      ExecuteTask(item.task, item.ptrs(), env, 0);
      return;
    case ItemKind::kExecute: {
      RiData& ri = *item.ri;
      std::lock_guard<std::mutex> run_lock(
          ri.run_mu);  // queued behind a run of it on another stream
      RunInstance(ri, env, item.tickets.data());
      return;
    }
    case ItemKind::kApplyUpdate: {
      UpdateBatch& batch = *item.update;
      RiData& ri = *batch.ri;
      const GroupRange range = ri.groups[batch.group];
      for (uint32_t i = 0; i < range.count; ++i) {
        Task& old = ri.streams[range.stream][range.first + i];
        Task replacement = batch.tasks[i];
        const uint32_t num_ptrs = NumArgPointers(replacement);
        for (uint32_t k = 0; k < num_ptrs; ++k) {
          ri.ptrs[old.args + k] = batch.ptrs[replacement.args + k];
        }
        replacement.seq = old.seq;
        replacement.args = old.args;
        replacement.group = old.group;
        old = replacement;
      }
      return;
    }
  }
}

void CpuStream::Enqueue(QueueItem item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    item.task.seq = next_seq_++;
    if (count_ == ring_.size()) {
      std::vector<QueueItem> grown(std::max<size_t>(16, 2 * ring_.size()));
      for (size_t i = 0; i < count_; ++i) grown[i] = std::move(ring_[(head_ + i) % ring_.size()]);
      ring_ = std::move(grown);
      head_ = 0;
    }
    ring_[(head_ + count_) % ring_.size()] = std::move(item);
    ++count_;
    ++pending_;
  }
  work_cv_.notify_one();
}

absl::Status CpuStream::Submit(Task task, std::span<void* const> ptrs) {
  if (routed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (capture_ != nullptr) return RecordLocked(task, ptrs);
    if (update_ != nullptr) {
      task.args = static_cast<uint32_t>(update_->ptrs.size());
      update_->ptrs.insert(update_->ptrs.end(), ptrs.begin(), ptrs.end());
      update_->tasks.push_back(task);
      return absl::OkStatus();
    }
  }
  QueueItem item;
  task.args = 0;
  item.task = task;
  if (ptrs.size() <= kInlinePtrs) {
    std::copy(ptrs.begin(), ptrs.end(), item.inline_ptrs.begin());
  } else {
    item.heap_ptrs.assign(ptrs.begin(), ptrs.end());
  }
  Enqueue(std::move(item));
  return absl::OkStatus();
}

absl::Status CpuStream::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, ": asynchronous copy of ", bytes,
                                                   " bytes with a null pointer"));
  }
  const bool host_src = kind == CopyKind::kHostToDevice || kind == CopyKind::kHostToHost;
  const bool host_dst = kind == CopyKind::kDeviceToHost || kind == CopyKind::kHostToHost;
  const bool pageable = (host_src && device_->KindOf(src) == MemoryKind::kPageableHost) ||
                        (host_dst && device_->KindOf(dst) == MemoryKind::kPageableHost);
  if (pageable) {
    const std::string call = absl::StrCat("asynchronous copy (", CopyKindName(kind),
                                          ") with pageable host memory on stream ", id_);
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (capture_ != nullptr) return RefusePageableCopyLocked(capture_.get(), call);
    RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
  }
  Task task;
  task.kind = TaskKind::kCopy;
  task.sub = static_cast<uint8_t>(kind);
  task.dst = dst;
  task.src = src;
  task.bytes = bytes;
  return Submit(task, {});
}

absl::Status CpuStream::MemsetAsync(void* dst, uint8_t value, size_t bytes) {
  if (bytes > 0 && dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_, ": asynchronous memset of ", bytes, " bytes at null"));
  }
  Task task;
  task.kind = TaskKind::kMemset;
  task.dst = dst;
  task.bytes = bytes;
  task.aux = value;
  return Submit(task, {});
}

absl::Status CpuStream::LaunchKernel(const PreparedKernel& kernel,
                                     std::span<const void* const> inputs,
                                     std::span<void* const> outputs, void* workspace) {
  if (outputs.size() != kernel.outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, ": kernel \"", kernel.op(),
                                                   "\" has ", kernel.outputs().size(), " outputs, ",
                                                   outputs.size(), " bound"));
  }
  if (inputs.size() > 0xffff || outputs.size() > 0xffff) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream ", id_, ": kernel \"", kernel.op(), "\" has too many arguments"));
  }
  if (kernel.workspace_bytes() > 0 && workspace == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, ": kernel \"", kernel.op(),
                                                   "\" needs a workspace of ",
                                                   kernel.workspace_bytes(), " bytes, none bound"));
  }
  absl::InlinedVector<void*, 8> ptrs;
  ptrs.reserve(inputs.size() + outputs.size() + 1);
  for (const void* input : inputs) ptrs.push_back(const_cast<void*>(input));
  for (void* output : outputs) ptrs.push_back(output);
  ptrs.push_back(workspace);
  Task task;
  task.kind = TaskKind::kKernel;
  task.num_inputs = static_cast<uint16_t>(inputs.size());
  task.num_outputs = static_cast<uint16_t>(outputs.size());
  task.target.kernel = &kernel;
  return Submit(task, ptrs);
}

absl::Status CpuStream::LaunchHostFunc(HostFn fn, void* user_data) {
  if (fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, ": null host function"));
  }
  Task task;
  task.kind = TaskKind::kHostFunc;
  task.target.fn = fn;
  task.dst = user_data;
  return Submit(task, {});
}

absl::Status CpuStream::Synchronize() {
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    const std::string call = absl::StrCat("stream synchronize (stream ", id_, ")");
    // A stream bound to a build runs nothing of the build: waiting for it is harmless.
    if (capture_ != nullptr && !capture_->built) {
      return RefuseOnCapturingStreamLocked(capture_.get(), call);
    }
    RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
  }
  return WaitIdleAndTakeError();
}

absl::StatusOr<bool> CpuStream::Query() {
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    const std::string call = absl::StrCat("stream query (stream ", id_, ")");
    if (capture_ != nullptr && !capture_->built) {
      return RefuseOnCapturingStreamLocked(capture_.get(), call);
    }
    RETURN_IF_ERROR(CheckUnsafeCallLocked(call));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return pending_ == 0;
}

absl::Status CpuStream::WaitIdleAndTakeError() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [this] { return pending_ == 0; });
  }
  std::lock_guard<std::mutex> lock(error_mu_);
  absl::Status status = std::move(error_);
  error_ = absl::OkStatus();
  failed_.store(false, std::memory_order_release);
  return status;
}

absl::StatusOr<bool> CpuStream::BeginInline() {
  {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    if (capture_ != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("a waited-for run on stream ", id_, ", which is capturing"));
    }
    RETURN_IF_ERROR(CheckUnsafeCallLocked(absl::StrCat("stream synchronize (stream ", id_, ")")));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ != 0 || stop_ || routed_.load(std::memory_order_acquire)) return false;
  inline_run_ = true;
  ++pending_;
  return true;
}

void CpuStream::EndInline() {
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inline_run_ = false;
    queued = count_ > 0;
    if (--pending_ == 0) idle_cv_.notify_all();
  }
  if (queued) work_cv_.notify_one();
}

absl::Status CpuStream::ExecuteAndWait(std::shared_ptr<RiData> ri, std::vector<uint64_t> tickets) {
  ASSIGN_OR_RETURN(bool here, BeginInline());
  if (!here) {
    RETURN_IF_ERROR(EnqueueExecute(std::move(ri), std::move(tickets)));
    return WaitIdleAndTakeError();
  }
  {
    RunEnv env = MakeRunEnv();
    std::lock_guard<std::mutex> run_lock(ri->run_mu);  // behind a run of it on another stream
    RunInstance(*ri, env, tickets.data());
  }
  ri.reset();  // released before the run counts as done, as a queued execution's
  EndInline();
  return WaitIdleAndTakeError();
}

absl::Status CpuStream::RunHostFuncAndWait(HostFn fn, void* user_data) {
  if (fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", id_, ": null host function"));
  }
  ASSIGN_OR_RETURN(bool here, BeginInline());
  if (!here) {
    RETURN_IF_ERROR(LaunchHostFunc(fn, user_data));
    return WaitIdleAndTakeError();
  }
  absl::Status status = fn(user_data);
  EndInline();
  absl::Status earlier = WaitIdleAndTakeError();
  return status.ok() ? earlier : status;
}

absl::Status CpuStream::EnqueueExecute(std::shared_ptr<RiData> ri, std::vector<uint64_t> tickets) {
  QueueItem item;
  item.kind = ItemKind::kExecute;
  item.ri = std::move(ri);
  item.tickets = std::move(tickets);
  Enqueue(std::move(item));
  return absl::OkStatus();
}

}  // namespace reprise::runtime::cpu
