// Backend and Device: the two top layers of the runtime core (like ggml's registry → device).
#ifndef REPRISE_RUNTIME_CORE_DEVICE_H_
#define REPRISE_RUNTIME_CORE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/event.h"
#include "runtime/core/kernel.h"
#include "runtime/core/runtime_types.h"
#include "runtime/core/stream.h"

namespace reprise::runtime {

/// One accelerator (or the host CPU): memory, pinned host memory (a reused pool), streams,
/// events and the backend's kernel registry. Owned by its Backend; outlives everything it made.
///
/// Memory: Malloc returns device memory (on the CPU backend: 64-byte aligned host memory);
/// MallocHost returns pinned host memory from a pool that reuses freed blocks. Any other host
/// pointer is pageable. Allocation and free are potentially unsafe calls (capture.h).
///
/// Thread-safety: every method may be called from any thread, except that kernels() is filled
/// once before use and read-only afterwards.
class Device {
 public:
  virtual ~Device() = default;

  /// "cpu:0", "cuda:1", ...
  virtual absl::string_view name() const = 0;

  virtual absl::StatusOr<void*> Malloc(size_t bytes) = 0;
  /// Error for a pointer this device did not allocate.
  virtual absl::Status Free(void* ptr) = 0;
  virtual absl::StatusOr<void*> MallocHost(size_t bytes) = 0;
  virtual absl::Status FreeHost(void* ptr) = 0;
  /// True when Malloc's memory is host memory that the host may read and write directly and
  /// kernels may be given host pointers (the CPU backend). False (the default) for a device
  /// with its own memory: data reaches it through copies (the engine then relocates a plan
  /// into device memory and stages through pinned memory, runtime/engine/device_plan.h).
  virtual bool host_memory() const { return false; }
  /// Where `ptr` lives (kPageableHost for anything this device did not allocate).
  virtual MemoryKind KindOf(const void* ptr) const = 0;
  virtual MemoryStats memory_stats() const = 0;

  /// Synchronous copy and memset: run at once on the calling thread. Potentially unsafe calls.
  virtual absl::Status Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;
  virtual absl::Status Memset(void* dst, uint8_t value, size_t bytes) = 0;

  /// A new stream, owned by the caller; it must not outlive the device.
  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  /// The device's default stream (owned by the device). It can never capture.
  virtual Stream* default_stream() = 0;
  /// A new event, owned by the caller.
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent(EventFlags flags) = 0;
  /// A new instance being built (build.h), owned by the caller. Optional: UNIMPLEMENTED unless
  /// the backend builds instances.
  virtual absl::StatusOr<std::unique_ptr<ModelRI>> BuildBegin();

  /// Waits for every stream of the device; returns the first async error found (clearing it).
  /// A potentially unsafe call.
  virtual absl::Status Synchronize() = 0;

  /// The backend's kernel registry; the kernels library fills it, e.g.
  /// `kernels::cpu::RegisterCpuKernels(device->kernels())`.
  virtual KernelRegistry* kernels() = 0;
};

/// A registry entry: a backend's name and its devices. Made by CreateBackend, owned by the
/// caller; owns its devices.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu", "cuda", ...
  virtual absl::string_view name() const = 0;
  virtual int device_count() const = 0;
  /// Borrowed; valid as long as the backend. Error for an index out of range.
  virtual absl::StatusOr<Device*> device(int index) = 0;
};

/// Names of the backends built into this binary; "cpu" is always present.
std::vector<std::string> AvailableBackends();

/// Makes the backend called `name`; NOT_FOUND lists the available ones.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(absl::string_view name);

}  // namespace reprise::runtime

#endif  // REPRISE_RUNTIME_CORE_DEVICE_H_
