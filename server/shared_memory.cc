#include "server/shared_memory.h"

#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/client_text.h"

namespace reprise::server {
namespace {

// A client can shrink its object under our mapping (ftruncate); touching the pages past its new
// end raises SIGBUS. Copies in and out of regions run under a guard: the handler jumps back to
// the copy, which fails with a status. A SIGBUS outside a guarded copy goes to the handler that
// was there before (or the default action).
// volatile, and fenced below: the compiler knows memcpy does not read it and would otherwise
// drop the store before the copy.
thread_local sigjmp_buf* volatile t_bus_guard = nullptr;
struct sigaction g_previous_bus_action;
std::once_flag g_bus_handler_once;

void OnBusError(int signo, siginfo_t* info, void* context) {
  if (t_bus_guard != nullptr) siglongjmp(*t_bus_guard, 1);
  if (g_previous_bus_action.sa_flags & SA_SIGINFO) {
    if (g_previous_bus_action.sa_sigaction != nullptr) {
      g_previous_bus_action.sa_sigaction(signo, info, context);
      return;
    }
  } else if (g_previous_bus_action.sa_handler != SIG_DFL &&
             g_previous_bus_action.sa_handler != SIG_IGN &&
             g_previous_bus_action.sa_handler != nullptr) {
    g_previous_bus_action.sa_handler(signo);
    return;
  }
  // Default action: reinstall it; returning re-runs the faulting access, which then ends the
  // process as it would have without us.
  signal(SIGBUS, SIG_DFL);
}

void InstallBusHandler() {
  std::call_once(g_bus_handler_once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnBusError;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous_bus_action);
  });
}

// memcpy that reports a bus error instead of dying of it.
bool GuardedCopy(void* dst, const void* src, size_t n) {
  sigjmp_buf env;
  if (sigsetjmp(env, 1) != 0) {
    t_bus_guard = nullptr;
    return false;
  }
  t_bus_guard = &env;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_bus_guard = nullptr;
  return true;
}

constexpr size_t kMaxRegionNameBytes = 256;

absl::Status CheckKey(const std::string& key) {
  absl::string_view k = key;
  if (!k.empty() && k[0] == '/') k.remove_prefix(1);
  if (k.empty() || k.size() > NAME_MAX || k == "." || k == ".." ||
      k.find('/') != absl::string_view::npos || k.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory key ", QuotedName(key),
                     " is not a POSIX shared-memory name (\"/name\": no other '/', at most ",
                     NAME_MAX, " bytes)"));
  }
  return absl::OkStatus();
}

// An int64 or uint64 parameter, >= 0.
absl::StatusOr<uint64_t> ReadUnsigned(const InferParameters& params, const char* key,
                                      absl::string_view where) {
  const inference::InferParameter& p = params.at(key);
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p.int64_param() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", key, "\" is ",
                                                       p.int64_param(), "; it must be >= 0"));
      }
      return static_cast<uint64_t>(p.int64_param());
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": parameter \"", key, "\" must be an int64_param"));
  }
}

}  // namespace

SharedMemoryRegion::SharedMemoryRegion(std::string name, std::string key, uint64_t offset,
                                       uint64_t byte_size, void* mapping, size_t mapping_size,
                                       size_t skip)
    : name_(std::move(name)),
      key_(std::move(key)),
      offset_(offset),
      byte_size_(byte_size),
      mapping_(mapping),
      mapping_size_(mapping_size),
      skip_(skip) {}

SharedMemoryRegion::~SharedMemoryRegion() { munmap(mapping_, mapping_size_); }

absl::Status SharedMemoryRegion::CheckRange(uint64_t offset, uint64_t size) const {
  if (offset > byte_size_ || size > byte_size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory region ", QuotedName(name_), ": ",
                                                   size, " bytes at offset ", offset,
                                                   " do not fit its ", byte_size_, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::Read(uint64_t offset, uint64_t size, std::string* out) const {
  if (absl::Status s = CheckRange(offset, size); !s.ok()) return s;
  out->resize(size);
  if (!GuardedCopy(out->data(), static_cast<const char*>(mapping_) + skip_ + offset, size)) {
    return absl::InternalError(absl::StrCat("shared memory region ", QuotedName(name_),
                                            ": the object shrank under its mapping (bus error)"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegion::Write(uint64_t offset, absl::string_view data) const {
  if (absl::Status s = CheckRange(offset, data.size()); !s.ok()) return s;
  if (!GuardedCopy(static_cast<char*>(mapping_) + skip_ + offset, data.data(), data.size())) {
    return absl::InternalError(absl::StrCat("shared memory region ", QuotedName(name_),
                                            ": the object shrank under its mapping (bus error)"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size) {
  if (name.empty() || name.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory region name must have 1 to ", kMaxRegionNameBytes, " bytes"));
  }
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (byte_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory region ", QuotedName(name), ": byte_size must be > 0"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = CheckRoom(name); !s.ok()) return s;
  }
  const int fd = shm_open(key.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat("unable to open shared memory region ",
                                            QuotedName(name), " (key ", QuotedName(key),
                                            "): ", std::strerror(err)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory key ", QuotedName(key), " is not a shared-memory object"));
  }
  const uint64_t object_size = static_cast<uint64_t>(st.st_size);
  if (offset > object_size || byte_size > object_size - offset) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory region ", QuotedName(name), ": ", byte_size, " bytes at offset ", offset,
        " do not fit the object ", QuotedName(key), " (", object_size, " bytes)"));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset / page * page;
  const uint64_t skip = offset - aligned;
  // skip < page and offset + byte_size <= object_size: no overflow.
  const size_t length = static_cast<size_t>(skip + byte_size);
  void* mapping =
      mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(aligned));
  const int map_errno = errno;
  close(fd);
  if (mapping == MAP_FAILED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unable to map shared memory region ", QuotedName(name), ": ", std::strerror(map_errno)));
  }
  InstallBusHandler();
  std::shared_ptr<const SharedMemoryRegion> region(new SharedMemoryRegion(
      name, key, offset, byte_size, mapping, length, static_cast<size_t>(skip)));
  std::lock_guard<std::mutex> lock(mu_);
  // Checked again: another Register may have come in between (the region unmaps on return).
  if (absl::Status s = CheckRoom(name); !s.ok()) return s;
  regions_.emplace(name, std::move(region));
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::CheckRoom(const std::string& name) const {
  if (regions_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("shared memory region ", QuotedName(name), " already in manager"));
  }
  if (static_cast<int>(regions_.size()) >= limits_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot register shared memory region ", QuotedName(name), ": ", limits_.max_regions,
        " regions are registered (limits.max_shared_memory_regions)"));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryRegistry::Unregister(const std::string& name) {
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>, std::less<>> gone;
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    gone.swap(regions_);
    return absl::OkStatus();
  }
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unable to find shared memory region ", QuotedName(name)));
  }
  gone.insert(regions_.extract(it));  // unmapped after the lock (if no request holds it)
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> SharedMemoryRegistry::Find(
    absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Unable to find shared memory region: ", QuotedName(name)));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> SharedMemoryRegistry::List(
    absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  for (const auto& [n, region] : regions_) {
    if (name.empty() || n == name) out.push_back(region);
  }
  if (!name.empty() && out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("Unable to find system shared memory region: ", QuotedName(name)));
  }
  return out;
}

bool UsesSharedMemory(const InferParameters& params) {
  return params.contains("shared_memory_region");
}

absl::StatusOr<SharedMemoryRef> ResolveSharedMemory(const InferParameters& params,
                                                    const SharedMemoryRegistry* registry,
                                                    absl::string_view where) {
  const inference::InferParameter& region = params.at("shared_memory_region");
  if (region.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": parameter \"shared_memory_region\" must be a string_param"));
  }
  if (!params.contains("shared_memory_byte_size")) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": parameter \"shared_memory_region\" needs \"shared_memory_byte_size\""));
  }
  SharedMemoryRef ref;
  absl::StatusOr<uint64_t> size = ReadUnsigned(params, "shared_memory_byte_size", where);
  if (!size.ok()) return size.status();
  ref.byte_size = *size;
  if (params.contains("shared_memory_offset")) {
    absl::StatusOr<uint64_t> offset = ReadUnsigned(params, "shared_memory_offset", where);
    if (!offset.ok()) return offset.status();
    ref.offset = *offset;
  }
  if (registry == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        where, ": Unable to find shared memory region: ", QuotedName(region.string_param())));
  }
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> found =
      registry->Find(region.string_param());
  if (!found.ok()) {
    return absl::Status(found.status().code(), absl::StrCat(where, ": ", found.status().message()));
  }
  ref.region = *std::move(found);
  const uint64_t region_size = ref.region->byte_size();
  if (ref.offset > region_size || ref.byte_size > region_size - ref.offset) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": shared memory offset ", ref.offset, " and byte size ", ref.byte_size,
                     " reach past the end of region ", QuotedName(ref.region->name()), " (",
                     region_size, " bytes)"));
  }
  return ref;
}

}  // namespace reprise::server
