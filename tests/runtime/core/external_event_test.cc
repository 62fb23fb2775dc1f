// Scenarios 1, 3 and 4 of capture_semantics.md §7: task-group updates gated by an external
// event, external events across instances, enumeration of a memset instance.
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

class ExternalEventTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    stream_ = NewStream();
    other_ = NewStream();
    event_ = NewEvent(EventFlags::kExternal);
    src_ = DeviceFloats(SelfValues());
    mid_ = DeviceFloats(0.0f);
    dst_ = DeviceFloats(0.0f);
  }

  std::unique_ptr<Stream> stream_, other_;
  std::unique_ptr<Event> event_;
  float *src_, *mid_, *dst_;
};

// Scenario 1.
TEST_F(ExternalEventTest, UpdateReachesAReplayBlockedAtTheExternalWait) {
  auto add11 = PrepareBinary(device_, "Add", 1.1f);
  auto add22 = PrepareBinary(device_, "Add", 2.2f);
  float* self = DeviceFloats(0.0f);
  float* other = DeviceFloats(0.0f);
  float* tmp = DeviceFloats(0.0f);
  float* out = DeviceFloats(0.0f);
  const std::vector<float> self_host = SelfValues();
  const std::vector<float> other_host(kCount, 2.0f);

  ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kRelaxed).ok());
  // RELAXED capture: the synchronous copies run at once and are not recorded.
  ASSERT_TRUE(device_->Memcpy(self, self_host.data(), kBytes, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(device_->Memcpy(other, other_host.data(), kBytes, CopyKind::kHostToDevice).ok());
  const void* add1_in[] = {self, other};
  void* add1_out[] = {tmp};
  ASSERT_TRUE(stream_->LaunchKernel(*add11, add1_in, add1_out, nullptr).ok());
  ASSERT_TRUE(stream_->WaitEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->ResetEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->BeginTaskGroup().ok());
  const void* add2_in[] = {tmp, other};
  void* add2_out[] = {out};
  ASSERT_TRUE(stream_->LaunchKernel(*add11, add2_in, add2_out, nullptr).ok());
  auto group = stream_->EndTaskGroup();
  ASSERT_TRUE(group.ok());
  auto ri = EndCapture(stream_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  ASSERT_EQ(*(*ri)->NumTasks(0), 4u);  // add#1, wait, reset, add#2

  // First execution: another stream records the event.
  ASSERT_TRUE(ExecuteAsync(**ri, stream_.get()).ok());
  ASSERT_TRUE(other_->RecordEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  ExpectFloats(Read(out), {5.4f, 6.4f, 7.4f, 8.4f, 9.4f, 10.4f, 11.4f, 12.4f});

  // Second execution: queued, and blocked at the wait (the reset cleared the event) ...
  ASSERT_TRUE(ExecuteAsync(**ri, stream_.get()).ok());
  auto idle = stream_->Query();
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);
  // ... while another stream updates the group (add#2 with alpha 2.2), then records.
  ASSERT_TRUE(other_->BeginTaskUpdate(*group).ok());
  ASSERT_TRUE(other_->LaunchKernel(*add22, add2_in, add2_out, nullptr).ok());
  ASSERT_TRUE(other_->EndTaskUpdate().ok());
  ASSERT_TRUE(other_->RecordEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  ExpectFloats(Read(out), {7.6f, 8.6f, 9.6f, 10.6f, 11.6f, 12.6f, 13.6f, 14.6f});
  ASSERT_TRUE(other_->Synchronize().ok());
}

// Scenario 3a: an instance that starts with an external wait runs only after a record.
TEST_F(ExternalEventTest, InstanceWaitsForARecordOnAnOrdinaryStream) {
  ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream_->WaitEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->MemcpyAsync(dst_, src_, kBytes, CopyKind::kDeviceToDevice).ok());
  auto ri = EndCapture(stream_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  ASSERT_TRUE(ExecuteAsync(**ri, stream_.get()).ok());
  auto idle = stream_->Query();
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);
  ExpectFloats(Read(dst_), std::vector<float>(kCount, 0.0f));  // blocked: no record yet
  ASSERT_TRUE(other_->RecordEvent(event_.get()).ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  ExpectFloats(Read(dst_), SelfValues());
}

// Scenario 3b: a copy then an external record; a stream waiting after the launch sees it.
TEST_F(ExternalEventTest, StreamWaitingAfterTheLaunchSeesTheCopy) {
  ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream_->MemcpyAsync(mid_, src_, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(stream_->RecordEvent(event_.get()).ok());
  auto ri = EndCapture(stream_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  ASSERT_TRUE(ExecuteAsync(**ri, stream_.get()).ok());
  ASSERT_TRUE(other_->WaitEvent(event_.get()).ok());
  ASSERT_TRUE(other_->MemcpyAsync(dst_, mid_, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(other_->Synchronize().ok());  // only the waiting stream
  ExpectFloats(Read(dst_), SelfValues());
  ASSERT_TRUE(stream_->Synchronize().ok());
  EXPECT_TRUE(*event_->Query());
}

// Scenario 3c: instance A (copy, record) and instance B (wait, copy) on two streams.
TEST_F(ExternalEventTest, InstancesOrderedThroughAnExternalEvent) {
  ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream_->MemcpyAsync(mid_, src_, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(stream_->RecordEvent(event_.get()).ok());
  auto a = EndCapture(stream_.get());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(BeginCapture(other_.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(other_->WaitEvent(event_.get()).ok());
  ASSERT_TRUE(other_->MemcpyAsync(dst_, mid_, kBytes, CopyKind::kDeviceToDevice).ok());
  auto b = EndCapture(other_.get());
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string json = DumpJson(**b, DumpFlags::kSummary);
  EXPECT_THAT(json, HasSubstr("\"kind\": \"event_wait\", \"external\": true"));

  for (int round = 0; round < 3; ++round) {
    std::fill(mid_, mid_ + kCount, 0.0f);
    std::fill(dst_, dst_ + kCount, 0.0f);
    ASSERT_TRUE(ExecuteAsync(**a, stream_.get()).ok());
    ASSERT_TRUE(ExecuteAsync(**b, other_.get()).ok());
    ASSERT_TRUE(other_->Synchronize().ok());  // only B's stream
    ExpectFloats(Read(dst_), SelfValues());
    ASSERT_TRUE(stream_->Synchronize().ok());
  }
}

// Scenario 4.
TEST_F(ExternalEventTest, EnumerateAMemsetInstance) {
  auto buffer = device_->Malloc(4096);
  ASSERT_TRUE(buffer.ok());
  allocations_.push_back(*buffer);
  auto* bytes = static_cast<uint8_t*>(*buffer);
  std::memset(bytes, 0xA5, 4096);
  ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream_->MemsetAsync(bytes, 0, 4096).ok());
  auto ri = EndCapture(stream_.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ(bytes[0], 0xA5);

  const size_t num_streams = (*ri)->NumStreams();
  ASSERT_EQ(num_streams, 1u);
  std::vector<RiStreamInfo> none;
  absl::Status too_small = (*ri)->GetStreams(none);
  EXPECT_EQ(too_small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_small.message(), HasSubstr("1 needed"));
  std::vector<RiStreamInfo> streams(num_streams);
  ASSERT_TRUE((*ri)->GetStreams(streams).ok());
  auto num_tasks = (*ri)->NumTasks(streams[0].index);
  ASSERT_TRUE(num_tasks.ok());
  ASSERT_EQ(*num_tasks, 1u);
  std::vector<TaskInfo> tasks(*num_tasks);
  ASSERT_TRUE((*ri)->GetTasks(streams[0].index, tasks).ok());
  EXPECT_EQ(tasks[0].kind, TaskKind::kMemset);

  ASSERT_TRUE(ExecuteAsync(**ri, stream_.get()).ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
}

// Eager events: a wait binds to the latest record issued before it, in host order.
TEST_F(ExternalEventTest, EagerRecordAndWaitOrderTwoStreams) {
  auto plain = NewEvent();
  EXPECT_TRUE(plain->Synchronize().ok());  // nothing recorded: returns at once
  ASSERT_TRUE(stream_->MemcpyAsync(mid_, src_, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(stream_->RecordEvent(plain.get()).ok());
  ASSERT_TRUE(other_->WaitEvent(plain.get()).ok());
  ASSERT_TRUE(other_->MemcpyAsync(dst_, mid_, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(other_->Synchronize().ok());
  ExpectFloats(Read(dst_), SelfValues());
  ASSERT_TRUE(plain->Synchronize().ok());
  EXPECT_TRUE(*plain->Query());
  ASSERT_TRUE(stream_->Synchronize().ok());
}

}  // namespace
}  // namespace reprise::runtime::testing
