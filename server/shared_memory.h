// Triton's system shared-memory extension: clients register POSIX shared-memory objects
// (shm_open keys) as named regions, and inputs and outputs of a ModelInfer request name a
// region, an offset and a byte size instead of carrying their data.
#ifndef REPRISE_SERVER_SHARED_MEMORY_H_
#define REPRISE_SERVER_SHARED_MEMORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"
#include "grpc_service.pb.h"

namespace reprise::server {

/// One registered region: the bytes [offset, offset + byte_size) of the shared-memory object
/// `key`, mapped read-write. Unmapped when the last owner lets go, so a request that holds it
/// keeps it valid after an Unregister. Immutable; any thread.
class SharedMemoryRegion {
 public:
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }

  /// Copies [offset, offset + size) of the region (offsets relative to the region) into `out`.
  /// INVALID_ARGUMENT when the range is not inside the region; INTERNAL when the object shrank
  /// under the mapping (the bus error is caught, the server keeps running).
  absl::Status Read(uint64_t offset, uint64_t size, std::string* out) const;
  /// Writes `data` at `offset` of the region; the same checks as Read.
  absl::Status Write(uint64_t offset, absl::string_view data) const;

 private:
  friend class SharedMemoryRegistry;
  SharedMemoryRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size,
                     void* mapping, size_t mapping_size, size_t skip);
  absl::Status CheckRange(uint64_t offset, uint64_t size) const;

  const std::string name_;
  const std::string key_;
  const uint64_t offset_;
  const uint64_t byte_size_;
  void* const mapping_;        // from mmap, page-aligned
  const size_t mapping_size_;  // what was mapped
  const size_t skip_;          // offset_ minus the page-aligned offset that was mapped
};

/// The registered regions of the server. Thread-safe.
class SharedMemoryRegistry {
 public:
  struct Limits {
    int max_regions = 64;  // registered at once; one more is RESOURCE_EXHAUSTED
  };
  explicit SharedMemoryRegistry(Limits limits) : limits_(limits) {}

  /// Maps [offset, offset + byte_size) of the object `key` (shm_open) as `name`.
  /// ALREADY_EXISTS for a name in use; INVALID_ARGUMENT for a bad name, key or range (the object
  /// must hold the whole range); NOT_FOUND when the object cannot be opened.
  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size);
  /// Forgets `name` (empty: every region). Requests that hold a region keep it mapped until
  /// they finish. NOT_FOUND for an unknown name.
  absl::Status Unregister(const std::string& name);
  /// The region `name`, or NOT_FOUND.
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> Find(absl::string_view name) const;
  /// Every region (empty `name`) or the one named (NOT_FOUND if none), by name.
  absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> List(
      absl::string_view name) const;

 private:
  // ALREADY_EXISTS for a name in use, RESOURCE_EXHAUSTED when max_regions are registered.
  absl::Status CheckRoom(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>, std::less<>> regions_
      ABSL_GUARDED_BY(mu_);
};

/// A tensor's data in a region: what a request's `shared_memory_*` parameters name.
struct SharedMemoryRef {
  std::shared_ptr<const SharedMemoryRegion> region;  // held until the request is answered
  uint64_t offset = 0;                               // within the region
  uint64_t byte_size = 0;
};

using InferParameters = google::protobuf::Map<std::string, inference::InferParameter>;

/// True when `params` name a shared-memory region (`shared_memory_region` is set).
bool UsesSharedMemory(const InferParameters& params);

/// The region, offset and byte size `params` name (`where` names the tensor in messages, e.g.
/// `model "m" version 1: input "x"`), checked against the region: INVALID_ARGUMENT for a
/// missing byte size, a wrong parameter type, a negative value or a range outside the region;
/// NOT_FOUND (with Triton's wording) for an unknown region, or when `registry` is null.
absl::StatusOr<SharedMemoryRef> ResolveSharedMemory(const InferParameters& params,
                                                    const SharedMemoryRegistry* registry,
                                                    absl::string_view where);

}  // namespace reprise::server

#endif  // REPRISE_SERVER_SHARED_MEMORY_H_
