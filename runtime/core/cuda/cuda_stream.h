// The CUDA backend's stream: a non-blocking cudaStream_t, and the place where Reprise's capture
// maps onto CUDA stream capture (cuda_stream_capture.cc).
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_STREAM_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/core/cuda/cuda_capture.h"
#include "runtime/core/stream.h"

namespace reprise::runtime::cuda {

class CudaDevice;

/// See Stream, with the differences CUDA forces (README.md): enqueue calls go straight to CUDA;
/// a failed kernel does not make later tasks skip; a task update is applied at EndTaskUpdate
/// (host order) and reaches launches issued after it, not a launch already queued.
class CudaStream final : public Stream {
 public:
  /// `device` is borrowed and must outlive the stream.
  static absl::StatusOr<std::unique_ptr<CudaStream>> Create(CudaDevice* device, bool is_default);
  ~CudaStream() override;

  Device* device() const override;
  uint64_t id() const override { return id_; }
  cudaStream_t handle() const { return stream_; }
  /// True while the stream takes part in a capture or collects a task update.
  bool capturing() const { return routed_.load(std::memory_order_acquire); }

  absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  absl::Status MemsetAsync(void* dst, uint8_t value, size_t bytes) override;
  absl::Status LaunchKernel(const PreparedKernel& kernel, std::span<const void* const> inputs,
                            std::span<void* const> outputs, void* workspace) override;
  absl::Status LaunchHostFunc(HostFn fn, void* user_data) override;
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

 private:
  CudaStream(CudaDevice* device, cudaStream_t stream, bool is_default);

  /// Issues one task: eagerly, or (when routed) recorded into the capture or the update, with
  /// the graph node(s) it added. `issue` makes the CUDA call(s) on stream_.
  absl::Status Issue(CudaTask task, const std::function<absl::Status()>& issue,
                     std::unique_ptr<HostCall> host_call = nullptr);
  /// The capture or update this stream records into (caller holds CaptureMutex()).
  CudaCapture* RoutedLocked() const;
  /// Appends `task` (already issued) to `capture`. Caller holds CaptureMutex().
  void AppendLocked(CudaCapture* capture, CudaTask task, size_t nodes_before,
                    std::unique_ptr<HostCall> host_call);
  /// Detaches every stream of `capture` and removes it from the active list.
  static void FinishLocked(CudaCapture* capture);
  /// Starts a CUDA capture of this stream (into `graph` when not null).
  absl::Status StartCaptureLocked(std::shared_ptr<CudaCapture> capture, cudaGraph_t graph);

  CudaDevice* const device_;
  const cudaStream_t stream_;
  const uint64_t id_;
  const bool is_default_;

  // Capture routing, guarded by CaptureMutex(); routed_ mirrors "capture_ != nullptr" so that
  // eager enqueues need no lock.
  std::atomic<bool> routed_{false};
  std::shared_ptr<CudaCapture> capture_;
  int capture_index_ = 0;
  // The update being collected (BeginTaskUpdate): its instance and group.
  CudaModelRI* update_instance_ = nullptr;
  int update_group_ = -1;
};

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_STREAM_H_
