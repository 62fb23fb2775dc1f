// The CUDA backend: one CudaDevice per visible GPU.
#ifndef REPRISE_RUNTIME_CORE_CUDA_CUDA_DEVICE_H_
#define REPRISE_RUNTIME_CORE_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mutex>  // NOLINT: see docs/development.md (TSan)
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "runtime/core/device.h"

namespace reprise::runtime::cuda {

class CudaStream;

/// See Device. Memory: Malloc takes blocks from the device's default CUDA memory pool with a
/// release threshold of "never", so freed memory stays cached in the pool and a later Malloc of
/// a similar size does not reach the driver (cudaMallocFromPoolAsync on a private stream, then
/// a wait: Malloc and Free are synchronous, potentially unsafe calls). MallocHost returns
/// page-locked memory (cudaHostAlloc) from a pool that reuses freed blocks by power-of-two size.
/// Synchronous Memcpy / Memset run on a private non-blocking stream (the legacy default stream
/// is never used: it would implicitly synchronise with, and so invalidate, captures).
///
/// Async errors: an error returned by a host function (eager or replayed) is kept in the device
/// and returned (and cleared) by the next Synchronize of the device or of any of its streams.
/// Kernel execution errors are CUDA's: sticky ones poison the context.
///
/// Thread-safety: every method may be called from any thread.
class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal);
  ~CudaDevice() override;

  absl::string_view name() const override { return name_; }
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  absl::Status Free(void* ptr) override;
  absl::StatusOr<void*> MallocHost(size_t bytes) override;
  absl::Status FreeHost(void* ptr) override;
  MemoryKind KindOf(const void* ptr) const override;
  MemoryStats memory_stats() const override;
  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  absl::Status Memset(void* dst, uint8_t value, size_t bytes) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  Stream* default_stream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(EventFlags flags) override;
  /// Built instances (runtime/core/build.h) are not implemented on CUDA: always UNIMPLEMENTED,
  /// nothing is allocated. The mapping is known but not written: a stream switch would become a
  /// conditional node (CUDA 12.4+) whose body is the target stream's graph, and an activate a
  /// forked branch of the graph. It is not a direct mapping: after a conditional node, the graph
  /// always goes on with the nodes that follow it, so the tasks after a switch would have to
  /// move into the node's else-body (a rewrite of the recorded streams), and a branch cannot be
  /// started from inside another branch's body, so every activated stream reached through a
  /// switch would have to be copied into that body. Until that rewrite exists, capture the work
  /// instead, with AddConditional for the choice.
  absl::StatusOr<std::unique_ptr<ModelRI>> BuildBegin() override;
  absl::Status Synchronize() override;
  KernelRegistry* kernels() override { return &kernels_; }

  int ordinal() const { return ordinal_; }
  /// Makes this device current on the calling thread (cudaSetDevice).
  absl::Status Activate() const;
  /// Keeps the first async error until TakeAsyncError.
  void RecordAsyncError(absl::Status status);
  absl::Status TakeAsyncError();

  void RegisterStream(CudaStream* stream);
  void UnregisterStream(CudaStream* stream);

 private:
  explicit CudaDevice(int ordinal);
  absl::Status Init();

  const int ordinal_;
  const std::string name_;
  KernelRegistry kernels_;
  cudaStream_t sync_stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::unique_ptr<CudaStream> default_stream_;

  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> device_blocks_ ABSL_GUARDED_BY(mu_);
  size_t device_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  size_t device_peak_ ABSL_GUARDED_BY(mu_) = 0;
  struct PinnedBlock {
    size_t capacity = 0;
    size_t requested = 0;
    bool in_use = false;
  };
  std::map<uintptr_t, PinnedBlock> pinned_blocks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<size_t, std::vector<void*>> pinned_free_ ABSL_GUARDED_BY(mu_);
  size_t pinned_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pinned_peak_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pinned_cached_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<CudaStream*> streams_ ABSL_GUARDED_BY(mu_);

  std::mutex error_mu_;
  absl::Status async_error_ ABSL_GUARDED_BY(error_mu_);
};

/// The "cuda" backend: every visible device ("cuda:0", "cuda:1", ...). Create fails with
/// UNAVAILABLE and the driver's message when no device can be used.
class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create();
  absl::string_view name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  absl::StatusOr<Device*> device(int index) override;

 private:
  CudaBackend() = default;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace reprise::runtime::cuda

#endif  // REPRISE_RUNTIME_CORE_CUDA_CUDA_DEVICE_H_
