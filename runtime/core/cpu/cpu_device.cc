#include "runtime/core/cpu/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cpu/capture_state.h"
#include "runtime/core/cpu/cpu_event.h"
#include "runtime/core/cpu/cpu_stream.h"

namespace reprise::runtime::cpu {

CpuDevice::CpuDevice(int index) : name_(absl::StrCat("cpu:", index)) {}

absl::StatusOr<std::unique_ptr<CpuDevice>> CpuDevice::Create(int index) {
  std::unique_ptr<CpuDevice> device(new CpuDevice(index));
  ASSIGN_OR_RETURN(device->default_stream_, CpuStream::Create(device.get(), /*is_default=*/true));
  return device;
}

CpuDevice::~CpuDevice() {
  default_stream_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, size] : device_blocks_) std::free(reinterpret_cast<void*>(address));
}

absl::StatusOr<void*> CpuDevice::Malloc(size_t bytes) {
  RETURN_IF_ERROR(CheckUnsafeCall(absl::StrCat("device malloc of ", bytes, " bytes")));
  if (bytes > (size_t{1} << 40)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": device allocation of ", bytes, " bytes"));
  }
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* ptr = std::aligned_alloc(64, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": device allocation of ", bytes, " bytes failed"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  device_blocks_[reinterpret_cast<uintptr_t>(ptr)] = rounded;
  device_in_use_ += rounded;
  device_peak_ = std::max(device_peak_, device_in_use_);
  return ptr;
}

absl::Status CpuDevice::Free(void* ptr) {
  RETURN_IF_ERROR(CheckUnsafeCall("device free"));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = device_blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == device_blocks_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: free of %p, which this device did not allocate", name_, ptr));
  }
  device_in_use_ -= it->second;
  device_blocks_.erase(it);
  std::free(ptr);
  return absl::OkStatus();
}

absl::StatusOr<void*> CpuDevice::MallocHost(size_t bytes) {
  RETURN_IF_ERROR(CheckUnsafeCall(absl::StrCat("pinned host malloc of ", bytes, " bytes")));
  return pinned_.Allocate(bytes);
}

absl::Status CpuDevice::FreeHost(void* ptr) {
  RETURN_IF_ERROR(CheckUnsafeCall("pinned host free"));
  return pinned_.Free(ptr);
}

MemoryKind CpuDevice::KindOf(const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = device_blocks_.upper_bound(address);
    if (it != device_blocks_.begin()) {
      --it;
      if (address < it->first + it->second) return MemoryKind::kDevice;
    }
  }
  return pinned_.Contains(ptr) ? MemoryKind::kPinnedHost : MemoryKind::kPageableHost;
}

MemoryStats CpuDevice::memory_stats() const {
  MemoryStats stats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats.device_in_use = device_in_use_;
    stats.device_peak = device_peak_;
  }
  stats.pinned_in_use = pinned_.in_use();
  stats.pinned_peak = pinned_.peak();
  stats.pinned_cached = pinned_.cached();
  return stats;
}

absl::Status CpuDevice::Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  RETURN_IF_ERROR(CheckUnsafeCall(
      absl::StrCat("synchronous copy (", CopyKindName(kind), ") of ", bytes, " bytes")));
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": synchronous copy of ", bytes, " bytes with a null pointer"));
  }
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::Memset(void* dst, uint8_t value, size_t bytes) {
  RETURN_IF_ERROR(CheckUnsafeCall(absl::StrCat("synchronous memset of ", bytes, " bytes")));
  if (bytes > 0 && dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": synchronous memset of ", bytes, " bytes at null"));
  }
  if (bytes > 0) std::memset(dst, value, bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Stream>> CpuDevice::CreateStream() {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuStream> stream, CpuStream::Create(this, false));
  return std::unique_ptr<Stream>(std::move(stream));
}

Stream* CpuDevice::default_stream() { return default_stream_.get(); }

absl::StatusOr<std::unique_ptr<Event>> CpuDevice::CreateEvent(EventFlags flags) {
  return std::unique_ptr<Event>(std::make_unique<CpuEvent>(flags == EventFlags::kExternal));
}

absl::Status CpuDevice::Synchronize() {
  RETURN_IF_ERROR(CheckUnsafeCall(absl::StrCat("device synchronize (", name_, ")")));
  // Streams cannot be destroyed while being synchronised (the caller owns them), so the list
  // may be used after the lock is dropped.
  std::vector<CpuStream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.assign(streams_.begin(), streams_.end());
  }
  absl::Status first;
  for (CpuStream* stream : streams) {
    absl::Status status = stream->WaitIdleAndTakeError();
    if (first.ok()) first = status;
  }
  return first;
}

void CpuDevice::RegisterStream(CpuStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.insert(stream);
}

void CpuDevice::UnregisterStream(CpuStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(stream);
}

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create() {
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  ASSIGN_OR_RETURN(backend->device_, CpuDevice::Create(0));
  return backend;
}

absl::StatusOr<Device*> CpuBackend::device(int index) {
  if (index != 0) {
    return absl::NotFoundError(absl::StrCat("backend cpu has 1 device; no device ", index));
  }
  return device_.get();
}

}  // namespace reprise::runtime::cpu
