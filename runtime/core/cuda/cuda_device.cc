#include "runtime/core/cuda/cuda_device.h"

#include <algorithm>
#include <bit>
#include <limits>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/cuda/cuda_capture.h"
#include "runtime/core/cuda/cuda_event.h"
#include "runtime/core/cuda/cuda_stream.h"
#include "runtime/core/cuda/cuda_util.h"

namespace reprise::runtime::cuda {
namespace {

size_t SizeClass(size_t bytes) { return std::bit_ceil(bytes < 64 ? size_t{64} : bytes); }

cudaMemcpyKind ToCuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
    case CopyKind::kHostToHost:
      return cudaMemcpyHostToHost;
  }
  return cudaMemcpyDefault;
}

}  // namespace

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal), name_(absl::StrCat("cuda:", ordinal)) {}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal) {
  std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal));
  RETURN_IF_ERROR(device->Init());
  return device;
}

absl::Status CudaDevice::Init() {
  RETURN_IF_ERROR(Activate());
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&sync_stream_, cudaStreamNonBlocking),
                             "cudaStreamCreate (device's private stream)"));
  RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetDefaultMemPool(&pool_, ordinal_), "cudaDeviceGetDefaultMemPool"));
  // Keep freed blocks in the pool: no driver allocation once the pool has grown.
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
                 "cudaMemPoolSetAttribute(release threshold)"));
  ASSIGN_OR_RETURN(default_stream_, CudaStream::Create(this, /*is_default=*/true));
  return absl::OkStatus();
}

CudaDevice::~CudaDevice() {
  default_stream_.reset();
  (void)cudaSetDevice(ordinal_);
  if (sync_stream_ != nullptr) (void)cudaStreamSynchronize(sync_stream_);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [address, block] : pinned_blocks_) {
    (void)cudaFreeHost(reinterpret_cast<void*>(address));
  }
  for (const auto& [address, bytes] : device_blocks_) {
    (void)cudaFreeAsync(reinterpret_cast<void*>(address), sync_stream_);
  }
  if (sync_stream_ != nullptr) {
    (void)cudaStreamSynchronize(sync_stream_);
    (void)cudaStreamDestroy(sync_stream_);
  }
}

absl::Status CudaDevice::Activate() const {
  return CudaStatus(cudaSetDevice(ordinal_), absl::StrCat("cudaSetDevice(", ordinal_, ")"));
}

absl::StatusOr<void*> CudaDevice::Malloc(size_t bytes) {
  RETURN_IF_ERROR(CheckUnsafeCall("malloc"));
  RETURN_IF_ERROR(Activate());
  ScopedCudaRelaxed relaxed;
  void* ptr = nullptr;
  const size_t size = bytes == 0 ? 1 : bytes;
  RETURN_IF_ERROR(CudaStatus(cudaMallocFromPoolAsync(&ptr, size, pool_, sync_stream_),
                             absl::StrCat("device malloc of ", bytes, " bytes on ", name_)));
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(sync_stream_), "device malloc"));
  std::lock_guard<std::mutex> lock(mu_);
  device_blocks_[reinterpret_cast<uintptr_t>(ptr)] = size;
  device_in_use_ += size;
  device_peak_ = std::max(device_peak_, device_in_use_);
  return ptr;
}

absl::Status CudaDevice::Free(void* ptr) {
  RETURN_IF_ERROR(CheckUnsafeCall("free"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = device_blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == device_blocks_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("free of ", absl::StrFormat("%p", ptr), ": not a block of ", name_));
    }
    device_in_use_ -= it->second;
    device_blocks_.erase(it);
  }
  RETURN_IF_ERROR(Activate());
  ScopedCudaRelaxed relaxed;
  RETURN_IF_ERROR(CudaStatus(cudaFreeAsync(ptr, sync_stream_), "device free"));
  return CudaStatus(cudaStreamSynchronize(sync_stream_), "device free");
}

absl::StatusOr<void*> CudaDevice::MallocHost(size_t bytes) {
  const size_t capacity = SizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto free_it = pinned_free_.find(capacity);
    if (free_it != pinned_free_.end() && !free_it->second.empty()) {
      void* ptr = free_it->second.back();
      free_it->second.pop_back();
      PinnedBlock& block = pinned_blocks_[reinterpret_cast<uintptr_t>(ptr)];
      block.in_use = true;
      block.requested = bytes;
      pinned_cached_ -= capacity;
      pinned_in_use_ += capacity;
      pinned_peak_ = std::max(pinned_peak_, pinned_in_use_);
      return ptr;
    }
  }
  // A new block: a driver call that can synchronise.
  RETURN_IF_ERROR(CheckUnsafeCall("malloc_host"));
  RETURN_IF_ERROR(Activate());
  ScopedCudaRelaxed relaxed;
  void* ptr = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&ptr, capacity, cudaHostAllocPortable),
                             absl::StrCat("pinned host malloc of ", bytes, " bytes")));
  std::lock_guard<std::mutex> lock(mu_);
  pinned_blocks_[reinterpret_cast<uintptr_t>(ptr)] = PinnedBlock{capacity, bytes, true};
  pinned_in_use_ += capacity;
  pinned_peak_ = std::max(pinned_peak_, pinned_in_use_);
  return ptr;
}

absl::Status CudaDevice::FreeHost(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pinned_blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == pinned_blocks_.end() || !it->second.in_use) {
    return absl::InvalidArgumentError(absl::StrCat("free_host of ", absl::StrFormat("%p", ptr),
                                                   ": not a pinned block in use on ", name_));
  }
  it->second.in_use = false;
  pinned_in_use_ -= it->second.capacity;
  pinned_cached_ += it->second.capacity;
  pinned_free_[it->second.capacity].push_back(ptr);
  return absl::OkStatus();
}

MemoryKind CudaDevice::KindOf(const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto device_it = device_blocks_.upper_bound(address);
  if (device_it != device_blocks_.begin()) {
    --device_it;
    if (address < device_it->first + device_it->second) return MemoryKind::kDevice;
  }
  auto pinned_it = pinned_blocks_.upper_bound(address);
  if (pinned_it != pinned_blocks_.begin()) {
    --pinned_it;
    if (pinned_it->second.in_use && address < pinned_it->first + pinned_it->second.capacity) {
      return MemoryKind::kPinnedHost;
    }
  }
  return MemoryKind::kPageableHost;
}

MemoryStats CudaDevice::memory_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats stats;
  stats.device_in_use = device_in_use_;
  stats.device_peak = device_peak_;
  stats.pinned_in_use = pinned_in_use_;
  stats.pinned_peak = pinned_peak_;
  stats.pinned_cached = pinned_cached_;
  return stats;
}

absl::Status CudaDevice::Memcpy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  RETURN_IF_ERROR(CheckUnsafeCall("memcpy"));
  RETURN_IF_ERROR(Activate());
  ScopedCudaRelaxed relaxed;
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(dst, src, bytes, ToCuda(kind), sync_stream_),
                             absl::StrCat("memcpy (", CopyKindName(kind), ", ", bytes, " bytes)")));
  return CudaStatus(cudaStreamSynchronize(sync_stream_), "memcpy");
}

absl::Status CudaDevice::Memset(void* dst, uint8_t value, size_t bytes) {
  RETURN_IF_ERROR(CheckUnsafeCall("memset"));
  RETURN_IF_ERROR(Activate());
  ScopedCudaRelaxed relaxed;
  if (KindOf(dst) != MemoryKind::kDevice) {
    // Host memory: CUDA's memset works only on device memory.
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(dst, value, bytes, sync_stream_),
                             absl::StrCat("memset of ", bytes, " bytes")));
  return CudaStatus(cudaStreamSynchronize(sync_stream_), "memset");
}

absl::StatusOr<std::unique_ptr<Stream>> CudaDevice::CreateStream() {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> stream, CudaStream::Create(this, false));
  return std::unique_ptr<Stream>(std::move(stream));
}

Stream* CudaDevice::default_stream() { return default_stream_.get(); }

absl::StatusOr<std::unique_ptr<ModelRI>> CudaDevice::BuildBegin() {
  return absl::UnimplementedError(absl::StrCat(
      name_,
      ": built instances (BuildBegin, stream switch / activate) are not implemented on the "
      "cuda backend; capture the work instead (conditional tasks for the choice), see "
      "runtime/core/cuda/cuda_device.h"));
}

absl::StatusOr<std::unique_ptr<Event>> CudaDevice::CreateEvent(EventFlags flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaEvent> event, CudaEvent::Create(this, flags));
  return std::unique_ptr<Event>(std::move(event));
}

absl::Status CudaDevice::Synchronize() {
  RETURN_IF_ERROR(CheckUnsafeCall("device synchronize"));
  RETURN_IF_ERROR(Activate());
  std::vector<CudaStream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.assign(streams_.begin(), streams_.end());
  }
  absl::Status first;
  ScopedCudaRelaxed relaxed;
  for (CudaStream* stream : streams) {
    // Capturing streams cannot be synchronised; their work is recorded, not queued.
    if (stream->capturing()) continue;
    first.Update(CudaStatus(cudaStreamSynchronize(stream->handle()), "device synchronize"));
  }
  first.Update(CudaStatus(cudaStreamSynchronize(sync_stream_), "device synchronize"));
  first.Update(TakeAsyncError());
  return first;
}

void CudaDevice::RecordAsyncError(absl::Status status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  async_error_.Update(status);
}

absl::Status CudaDevice::TakeAsyncError() {
  std::lock_guard<std::mutex> lock(error_mu_);
  absl::Status error = std::move(async_error_);
  async_error_ = absl::OkStatus();
  return error;
}

void CudaDevice::RegisterStream(CudaStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.insert(stream);
}

void CudaDevice::UnregisterStream(CudaStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(stream);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create() {
  int count = 0;
  absl::Status status = CudaDeviceCount(&count);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cuda backend: no usable device: ", status.message()));
  }
  if (count == 0) return absl::UnavailableError("cuda backend: no cuda device is visible");
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Create(i));
    backend->devices_.push_back(std::move(device));
  }
  return backend;
}

absl::StatusOr<Device*> CudaBackend::device(int index) {
  if (index < 0 || index >= device_count()) {
    return absl::OutOfRangeError(
        absl::StrCat("cuda device ", index, " out of range [0, ", device_count(), ")"));
  }
  return devices_[index].get();
}

}  // namespace reprise::runtime::cuda
