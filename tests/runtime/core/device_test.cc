// Backend registry, device memory and stream basics of the CPU backend.
#include <atomic>
#include <string>

#include "gmock/gmock.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

TEST(BackendTest, CpuIsAlwaysPresentAndUnknownNamesAreNotFound) {
  EXPECT_THAT(AvailableBackends(), ::testing::Contains("cpu"));
  auto missing = CreateBackend("npu");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("available: cpu"));
  auto cpu = CreateBackend("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_EQ((*cpu)->device_count(), 1);
  EXPECT_FALSE((*cpu)->device(1).ok());
  auto device = (*cpu)->device(0);
  ASSERT_TRUE(device.ok());
  EXPECT_EQ((*device)->name(), "cpu:0");
  // The core registers no kernels itself.
  EXPECT_TRUE((*device)->kernels()->Ops().empty());
}

TEST_F(CoreTest, MemoryAccountingAndBadFrees) {
  const MemoryStats before = device_->memory_stats();
  auto ptr = device_->Malloc(100);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(device_->memory_stats().device_in_use, before.device_in_use + 128);
  EXPECT_GE(device_->memory_stats().device_peak, before.device_in_use + 128);
  int local = 0;
  absl::Status bad = device_->Free(&local);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("did not allocate"));
  ASSERT_TRUE(device_->Free(*ptr).ok());
  EXPECT_FALSE(device_->Free(*ptr).ok());  // double free is an error, not a crash
  EXPECT_EQ(device_->memory_stats().device_in_use, before.device_in_use);
}

absl::Status Fail(void*) { return absl::UnavailableError("no luck"); }

TEST_F(CoreTest, DeviceSynchronizeReportsAStreamsAsyncError) {
  auto stream = NewStream();
  ASSERT_TRUE(stream->LaunchHostFunc(&Fail, nullptr).ok());
  absl::Status status = device_->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("no luck"));
  EXPECT_TRUE(stream->Synchronize().ok());  // reported once
}

TEST_F(CoreTest, LaunchArgumentsAreChecked) {
  auto stream = NewStream();
  auto add = PrepareBinary(device_, "Add");
  float* a = DeviceFloats(1.0f);
  const void* in[] = {a, a};
  void* two_outputs[] = {a, a};
  absl::Status status = stream->LaunchKernel(*add, in, two_outputs, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("1 outputs, 2 bound"));
  EXPECT_FALSE(stream->MemcpyAsync(nullptr, a, kBytes, CopyKind::kDeviceToDevice).ok());
  EXPECT_FALSE(stream->LaunchHostFunc(nullptr, nullptr).ok());
  EXPECT_FALSE(stream->RecordEvent(nullptr).ok());
}

TEST_F(CoreTest, DestroyingAStreamBlockedOnAnEventDoesNotHang) {
  auto event = NewEvent();
  std::atomic<int> ran{0};
  {
    auto stream = NewStream();
    ASSERT_TRUE(stream->WaitEvent(event.get()).ok());  // nothing will ever record it
    ASSERT_TRUE(stream
                    ->LaunchHostFunc(
                        +[](void* counter) {
                          ++*static_cast<std::atomic<int>*>(counter);
                          return absl::OkStatus();
                        },
                        &ran)
                    .ok());
  }
  // The wait gave up, so its stream's later compute task was skipped as after an error.
  EXPECT_EQ(ran.load(), 0);
}

TEST_F(CoreTest, EagerCopyMemsetKernelRunInOrder) {
  auto stream = NewStream();
  auto add = PrepareBinary(device_, "Add", 0.5f);
  auto pinned = device_->MallocHost(kBytes);
  ASSERT_TRUE(pinned.ok());
  auto* host = static_cast<float*>(*pinned);
  for (int i = 0; i < kCount; ++i) host[i] = static_cast<float>(i);
  float* a = DeviceFloats(0.0f);
  float* b = DeviceFloats(0.0f);
  float* out = DeviceFloats(0.0f);
  ASSERT_TRUE(stream->MemcpyAsync(a, host, kBytes, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(stream->MemsetAsync(b, 0, kBytes).ok());
  ASSERT_TRUE(stream->MemcpyAsync(b, a, kBytes, CopyKind::kDeviceToDevice).ok());
  const void* in[] = {a, b};
  void* outs[] = {out};
  ASSERT_TRUE(stream->LaunchKernel(*add, in, outs, nullptr).ok());
  ASSERT_TRUE(stream->MemcpyAsync(host, out, kBytes, CopyKind::kDeviceToHost).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (int i = 0; i < kCount; ++i) EXPECT_FLOAT_EQ(host[i], 1.5f * i);
  ASSERT_TRUE(device_->FreeHost(host).ok());
}

}  // namespace
}  // namespace reprise::runtime::testing
