// The system shared-memory registry: register / unregister / status, every range checked, a
// region kept mapped while a request holds it, and an object that shrinks under its mapping.
#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;

// A POSIX shared-memory object of `size` bytes filled with 0, 1, 2, ...; unlinked at the end.
class ShmObject {
 public:
  explicit ShmObject(size_t size)
      : key_(absl::StrCat("/reprise-shm-test-", getpid(), "-", counter_++)) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    for (size_t i = 0; i < size; ++i) static_cast<unsigned char*>(p)[i] = i % 251;
    munmap(p, size);
    close(fd);
  }
  ~ShmObject() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }
  void Truncate(size_t size) const {
    const int fd = shm_open(key_.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    close(fd);
  }

 private:
  static inline int counter_ = 0;
  std::string key_;
};

InferParameters Params(const std::string& region, int64_t offset, int64_t size) {
  InferParameters p;
  p["shared_memory_region"].set_string_param(region);
  p["shared_memory_offset"].set_int64_param(offset);
  p["shared_memory_byte_size"].set_int64_param(size);
  return p;
}

TEST(SharedMemoryTest, RegisterReadWriteStatusUnregister) {
  ShmObject object(3 * 4096);
  SharedMemoryRegistry registry({});
  // An offset that is not page-aligned maps from the page below it.
  ASSERT_TRUE(registry.Register("r", object.key(), 5000, 100).ok());
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> region = registry.Find("r");
  ASSERT_TRUE(region.ok());
  std::string bytes;
  ASSERT_TRUE((*region)->Read(10, 4, &bytes).ok());
  EXPECT_EQ(bytes, std::string({static_cast<char>(5010 % 251), static_cast<char>(5011 % 251),
                                static_cast<char>(5012 % 251), static_cast<char>(5013 % 251)}));
  ASSERT_TRUE((*region)->Write(0, "abc").ok());
  ASSERT_TRUE((*region)->Read(0, 3, &bytes).ok());
  EXPECT_EQ(bytes, "abc");

  auto list = registry.List("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0]->key(), object.key());
  EXPECT_EQ((*list)[0]->offset(), 5000u);
  EXPECT_EQ((*list)[0]->byte_size(), 100u);
  EXPECT_EQ(registry.List("other").status().code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(registry.Register("r", object.key(), 0, 8).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.Unregister("r").ok());
  EXPECT_EQ(registry.Find("r").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Unregister("r").code(), absl::StatusCode::kNotFound);
  // The lease taken before the unregister still reads the mapping (no use after unmap).
  ASSERT_TRUE((*region)->Read(0, 3, &bytes).ok());
  EXPECT_EQ(bytes, "abc");
}

TEST(SharedMemoryTest, RangesAreCheckedAgainstTheObjectAndTheRegion) {
  ShmObject object(4096);
  SharedMemoryRegistry registry({});
  EXPECT_EQ(registry.Register("a", object.key(), 4000, 97).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("a", object.key(), UINT64_MAX, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("a", object.key(), 8, UINT64_MAX - 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("a", object.key(), 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("a", "/no-such-reprise-object", 0, 8).code(),
            absl::StatusCode::kNotFound);
  for (const std::string& key :
       std::vector<std::string>{"", "/", "/a/b", "/..", std::string(300, 'k')}) {
    EXPECT_EQ(registry.Register("a", key, 0, 8).code(), absl::StatusCode::kInvalidArgument) << key;
  }
  ASSERT_TRUE(registry.Register("a", object.key(), 96, 4000).ok());

  EXPECT_TRUE(ResolveSharedMemory(Params("a", 0, 4000), &registry, "t").ok());
  EXPECT_TRUE(ResolveSharedMemory(Params("a", 3990, 10), &registry, "t").ok());
  for (const auto& [offset, size] : std::vector<std::pair<int64_t, int64_t>>{
           {3991, 10}, {0, 4001}, {4001, 0}, {INT64_MAX, 2}, {2, INT64_MAX}}) {
    absl::StatusOr<SharedMemoryRef> ref =
        ResolveSharedMemory(Params("a", offset, size), &registry, "input \"x\"");
    EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument) << offset << " " << size;
    EXPECT_THAT(ref.status().message(), HasSubstr("input \"x\""));
  }
  EXPECT_EQ(ResolveSharedMemory(Params("a", -1, 4), &registry, "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveSharedMemory(Params("b", 0, 4), &registry, "t").status().code(),
            absl::StatusCode::kNotFound);
  InferParameters no_size;
  no_size["shared_memory_region"].set_string_param("a");
  EXPECT_EQ(ResolveSharedMemory(no_size, &registry, "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> region = registry.Find("a");
  std::string out;
  EXPECT_EQ((*region)->Read(3999, 2, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*region)->Write(UINT64_MAX, "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryTest, RegionCountIsBounded) {
  ShmObject object(64);
  SharedMemoryRegistry registry({.max_regions = 2});
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 8).ok());
  ASSERT_TRUE(registry.Register("b", object.key(), 8, 8).ok());
  EXPECT_EQ(registry.Register("c", object.key(), 16, 8).code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(registry.Unregister("").ok());  // all
  EXPECT_TRUE(registry.List("")->empty());
  EXPECT_TRUE(registry.Register("c", object.key(), 16, 8).ok());
}

TEST(SharedMemoryTest, ObjectShrunkUnderTheMappingIsAnErrorNotACrash) {
  ShmObject object(3 * 4096);
  SharedMemoryRegistry registry({});
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 3 * 4096).ok());
  object.Truncate(4096);
  absl::StatusOr<std::shared_ptr<const SharedMemoryRegion>> region = registry.Find("r");
  std::string out;
  absl::Status read = (*region)->Read(2 * 4096, 16, &out);
  EXPECT_EQ(read.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(read.message(), HasSubstr("bus error"));
  EXPECT_EQ((*region)->Write(2 * 4096, "xyz").code(), absl::StatusCode::kInternal);
  EXPECT_TRUE((*region)->Read(0, 16, &out).ok());  // what is still there reads fine
}

}  // namespace
}  // namespace reprise::server
