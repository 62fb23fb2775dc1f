// The CPU backend: always present, the reference for every other backend.
#ifndef REPRISE_RUNTIME_CORE_CPU_CPU_DEVICE_H_
#define REPRISE_RUNTIME_CORE_CPU_CPU_DEVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <condition_variable>  // NOLINT: see docs/development.md (TSan)
#include <mutex>               // NOLINT
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "runtime/core/cpu/pinned_pool.h"
#include "runtime/core/device.h"

namespace reprise::runtime::cpu {

class CpuStream;

/// See Device. "Device" memory is 64-byte aligned host memory; the default stream is made with
/// the device. Streams register themselves so that Synchronize can reach them.
class CpuDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CpuDevice>> Create(int index);
  ~CpuDevice() override;

  absl::string_view name() const override { return name_; }
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  absl::Status Free(void* ptr) override;
  absl::StatusOr<void*> MallocHost(size_t bytes) override;
  absl::Status FreeHost(void* ptr) override;
  bool host_memory() const override { return true; }
  MemoryKind KindOf(const void* ptr) const override;
  MemoryStats memory_stats() const override;
  absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  absl::Status Memset(void* dst, uint8_t value, size_t bytes) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  Stream* default_stream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(EventFlags flags) override;
  /// Native: see runtime/core/build.h (cpu_build.cc).
  absl::StatusOr<std::unique_ptr<ModelRI>> BuildBegin() override;
  absl::Status Synchronize() override;
  KernelRegistry* kernels() override { return &kernels_; }

  void RegisterStream(CpuStream* stream);
  void UnregisterStream(CpuStream* stream);

 private:
  explicit CpuDevice(int index);

  const std::string name_;
  KernelRegistry kernels_;
  PinnedPool pinned_;
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> device_blocks_ ABSL_GUARDED_BY(mu_);
  size_t device_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  size_t device_peak_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<CpuStream*> streams_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CpuStream> default_stream_;
};

/// The "cpu" backend: one device.
class CpuBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create();
  absl::string_view name() const override { return "cpu"; }
  int device_count() const override { return 1; }
  absl::StatusOr<Device*> device(int index) override;

 private:
  CpuBackend() = default;
  std::unique_ptr<CpuDevice> device_;
};

}  // namespace reprise::runtime::cpu

#endif  // REPRISE_RUNTIME_CORE_CPU_CPU_DEVICE_H_
