// The CPU backend's stream: one worker thread draining a FIFO of queue items.
#ifndef REPRISE_RUNTIME_CORE_CPU_CPU_STREAM_H_
#define REPRISE_RUNTIME_CORE_CPU_CPU_STREAM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/base/thread_annotations.h"
#include "runtime/core/cpu/capture_state.h"
#include "runtime/core/cpu/task.h"
#include "runtime/core/stream.h"

namespace reprise::runtime::cpu {

class CpuDevice;

/// Replacement tasks collected between BeginTaskUpdate and EndTaskUpdate.
struct UpdateBatch {
  std::shared_ptr<RiData> ri;
  uint64_t instance_id = 0;
  int group = -1;
  std::vector<Task> tasks;
  std::vector<void*> ptrs;
};

/// See Stream (runtime/core/stream.h). ExecuteAsync of an instance queues one item that makes
/// this stream's worker walk the instance's task array.
class CpuStream final : public Stream {
 public:
  /// `device` is borrowed and must outlive the stream.
  static absl::StatusOr<std::unique_ptr<CpuStream>> Create(CpuDevice* device, bool is_default);
  ~CpuStream() override;

  Device* device() const override;
  uint64_t id() const override { return id_; }
  bool is_default() const { return is_default_; }

  absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  absl::Status MemsetAsync(void* dst, uint8_t value, size_t bytes) override;
  absl::Status LaunchKernel(const PreparedKernel& kernel, std::span<const void* const> inputs,
                            std::span<void* const> outputs, void* workspace) override;
  absl::Status LaunchHostFunc(HostFn fn, void* user_data) override;
  /// On the calling thread when the stream is idle (see ExecuteAndWait).
  absl::Status RunHostFuncAndWait(HostFn fn, void* user_data) override;
  absl::Status RecordEvent(Event* event) override;
  absl::Status WaitEvent(Event* event) override;
  absl::Status ResetEvent(Event* event) override;
  absl::Status Synchronize() override;
  absl::StatusOr<bool> Query() override;

  absl::Status BeginCapture(CaptureMode mode) override;
  absl::StatusOr<std::unique_ptr<ModelRI>> EndCapture() override;
  CaptureInfo GetCaptureInfo() override;
  absl::Status BeginBodyCapture(ModelRI* body, CaptureMode mode) override;
  absl::Status EndBodyCapture() override;
  absl::StatusOr<std::vector<ModelRI*>> AddConditional(ConditionalKind kind,
                                                       ConditionHandle condition,
                                                       int num_bodies) override;
  absl::Status BeginTaskGroup() override;
  absl::StatusOr<TaskGroup> EndTaskGroup() override;
  absl::Status BeginTaskUpdate(TaskGroup group) override;
  absl::Status EndTaskUpdate() override;
  absl::Status SwitchStream(const void* value, CompareOp compare, const void* rhs,
                            SwitchDataType dtype, Stream* true_stream) override;
  absl::Status ActiveStream(Stream* target) override;

  /// Queues one execution of `ri` with the external tickets bound at issue time.
  absl::Status EnqueueExecute(std::shared_ptr<RiData> ri, std::vector<uint64_t> tickets);
  /// One execution of `ri`, waited for (ModelRI::Execute). When nothing is queued or running on
  /// the stream, it runs on the calling thread and the stream counts as busy meanwhile: work
  /// queued by other threads waits behind it, as behind a queued execution. Otherwise it is
  /// queued. Then waits until the stream is idle and returns its error, like Synchronize.
  absl::Status ExecuteAndWait(std::shared_ptr<RiData> ri, std::vector<uint64_t> tickets);
  /// Waits until idle and returns (clearing) the stream's async error; no capture checks.
  absl::Status WaitIdleAndTakeError();
  /// True when capturing or collecting a task update. Caller holds CaptureMutex().
  bool RoutedLocked() const { return capture_ != nullptr || update_ != nullptr; }

  // Builds (cpu_build.cc); the caller holds CaptureMutex().
  /// The capture or build this stream records into (null when none) and its index there.
  const std::shared_ptr<CaptureState>& capture_locked() const { return capture_; }
  int capture_index_locked() const { return capture_index_; }
  bool update_open_locked() const { return update_ != nullptr; }
  /// Binds the stream as stream `index` of `build`.
  void AttachLocked(std::shared_ptr<CaptureState> build, int index);
  /// Unbinds it: its async calls run eagerly again.
  void DetachLocked();

 private:
  enum class ItemKind : uint8_t { kTask, kExecute, kApplyUpdate };
  // One queued unit of work. Kernel pointers of an eager task are stored inline when they fit
  // (no allocation for the common case); std::array rather than absl::InlinedVector because
  // g++ 12 reports false -Wmaybe-uninitialized on moving the latter.
  static constexpr size_t kInlinePtrs = 8;
  struct QueueItem {
    ItemKind kind = ItemKind::kTask;
    Task task;
    std::array<void*, kInlinePtrs> inline_ptrs{};
    std::vector<void*> heap_ptrs;  // used when the pointers do not fit inline
    std::shared_ptr<RiData> ri;
    std::vector<uint64_t> tickets;  // external tickets of an execution (empty: no allocation)
    std::shared_ptr<UpdateBatch> update;
    void* const* ptrs() const { return heap_ptrs.empty() ? inline_ptrs.data() : heap_ptrs.data(); }
  };

  CpuStream(CpuDevice* device, bool is_default);
  void WorkerLoop();
  void RunItem(QueueItem& item);
  // Where the tasks of this stream report their errors.
  RunEnv MakeRunEnv();
  // Unsafe-call checks of a synchronising call, then: true when the stream was idle and now
  // counts as busy with a run on the calling thread (the worker takes nothing meanwhile), which
  // EndInline ends.
  absl::StatusOr<bool> BeginInline();
  void EndInline();
  void Enqueue(QueueItem item);
  /// Records, collects into an update, or queues `task` (with its kernel pointers).
  absl::Status Submit(Task task, std::span<void* const> ptrs);
  /// Appends `task` to the capture this stream takes part in. Caller holds CaptureMutex().
  absl::Status RecordLocked(Task task, std::span<void* const> ptrs);
  /// Ends this stream's capture (top-level or body): detaches every stream. Caller holds
  /// CaptureMutex().
  absl::Status FinishCaptureLocked(bool body);

  CpuDevice* const device_;
  const uint64_t id_;
  const bool is_default_;

  // Capture routing, guarded by CaptureMutex(); routed_ mirrors "capture_ or update_" so that
  // eager enqueues need no lock to know they are eager.
  std::atomic<bool> routed_{false};
  std::shared_ptr<CaptureState> capture_;
  int capture_index_ = 0;
  std::unique_ptr<UpdateBatch> update_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for items
  std::condition_variable idle_cv_;  // Synchronize waits for pending_ == 0
  // FIFO as a ring over a vector that only grows: a push allocates nothing once the ring is
  // big enough (std::deque would allocate a node every other item of this size).
  std::vector<QueueItem> ring_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // queued or running
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // An execution runs on a caller's thread (ExecuteAndWait): the worker takes nothing until
  // it ends, so the stream's order holds.
  bool inline_run_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;

  std::atomic<bool> cancel_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  absl::Status error_ ABSL_GUARDED_BY(error_mu_);

  std::thread worker_;
};

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CPU_STREAM_H_
