// capture_semantics.md on the CUDA backend: the seed sample (§2), modes and unsafe calls, fork /
// join (§3) and the four scenarios of §7, with CUDA's documented differences (README.md).
#include <thread>

#include "gmock/gmock.h"
#include "tests/cuda/cuda_test_util.h"

namespace reprise::runtime::cuda_testing {
namespace {

using ::testing::HasSubstr;

class CudaCaptureTest : public CudaTest {};

TEST_F(CudaCaptureTest, SeedSampleFourReplays) {
  auto stream = NewStream();
  auto host = device_->MallocHost(kBytes);
  ASSERT_TRUE(host.ok()) << host.status();
  auto* host_self = static_cast<float*>(host.value());
  for (int i = 0; i < kCount; ++i) host_self[i] = static_cast<float>(i + 1);
  float* self = DeviceFloats(0.0f);
  float* other = DeviceFloats(0.0f);
  float* tmp = DeviceFloats(0.0f);
  float* out = DeviceFloats(0.0f);
  auto add = PrepareBinary("Add", 1.1f);
  auto mul = PrepareBinary("Mul");
  ASSERT_NE(add, nullptr);
  ASSERT_NE(mul, nullptr);
  const std::vector<float> host_other(kCount, 2.0f);

  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream->MemcpyAsync(self, host_self, kBytes, CopyKind::kHostToDevice).ok());
  CaptureMode mode = CaptureMode::kRelaxed;
  ExchangeThreadCaptureMode(&mode);
  ASSERT_TRUE(device_->Memcpy(other, host_other.data(), kBytes, CopyKind::kHostToDevice).ok());
  ExchangeThreadCaptureMode(&mode);
  EXPECT_EQ(ThreadCaptureMode(), CaptureMode::kGlobal);
  const void* add_in[] = {self, other};
  void* add_out[] = {tmp};
  ASSERT_TRUE(stream->LaunchKernel(*add, add_in, add_out, nullptr).ok());
  const void* mul_in[] = {tmp, other};
  void* mul_out[] = {out};
  ASSERT_TRUE(stream->LaunchKernel(*mul, mul_in, mul_out, nullptr).ok());
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  // The synchronous copy ran at once; the recorded one did not.
  ExpectFloats(Read(other), host_other);
  ExpectFloats(Read(self), std::vector<float>(kCount, 0.0f));

  const std::vector<float> expected = {6.4f, 8.4f, 10.4f, 12.4f, 14.4f, 16.4f, 18.4f, 20.4f};
  for (int loop = 0; loop < 4; ++loop) {
    Write(out, std::vector<float>(kCount, -1.0f));
    ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    ExpectFloats(Read(out), expected);
  }
  auto tasks = (*ri)->NumTasks(0);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(*tasks, 3u);  // copy, add, mul (the synchronous copy was not recorded)
  CheckJsonWithPython(DumpJson(**ri, DumpFlags::kVerbose),
                      "t=d[\"streams\"][0][\"tasks\"]; "
                      "assert [x[\"kind\"] for x in t]==[\"copy\",\"kernel\",\"kernel\"]; "
                      "assert [x.get(\"op\") for x in t[1:]]==[\"Add\",\"Mul\"]; "
                      "assert d[\"graph\"][\"num_nodes\"]==3");
  EXPECT_TRUE(device_->FreeHost(host_self).ok());
}

// The capture registry is shared: a GLOBAL capture on a CPU stream refuses an unsafe call on the
// CUDA device, and a GLOBAL CUDA capture refuses one on the CPU device.
TEST_F(CudaCaptureTest, GlobalCaptureRefusesUnsafeCallsAcrossBackends) {
  auto cpu_backend = CreateBackend("cpu");
  ASSERT_TRUE(cpu_backend.ok());
  auto cpu = (*cpu_backend)->device(0);
  ASSERT_TRUE(cpu.ok());
  auto cpu_stream = (*cpu)->CreateStream();
  ASSERT_TRUE(cpu_stream.ok());
  ASSERT_TRUE(BeginCapture(cpu_stream->get(), CaptureMode::kGlobal).ok());
  auto refused = device_->Malloc(64);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetCaptureInfo(cpu_stream->get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(cpu_stream->get()).ok());

  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  EXPECT_EQ((*cpu)->Malloc(64).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(stream.get()).ok());
}

// Built instances are not implemented on CUDA (cuda_device.h says why).
TEST_F(CudaCaptureTest, BuildBeginIsUnimplemented) {
  auto ri = device_->BuildBegin();
  EXPECT_EQ(ri.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(ri.status().message()), HasSubstr("capture the work instead"));
}

TEST_F(CudaCaptureTest, DefaultStreamAndDoubleCaptureAreRefused) {
  EXPECT_FALSE(BeginCapture(device_->default_stream(), CaptureMode::kGlobal).ok());
  auto stream = NewStream();
  EXPECT_FALSE(EndCapture(stream.get()).ok());
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  EXPECT_FALSE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
  EXPECT_NE(GetCaptureInfo(stream.get()).instance, nullptr);
  auto ri = EndCapture(stream.get());
  EXPECT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
}

TEST_F(CudaCaptureTest, UnsafeCallInGlobalModeInvalidates) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  auto ptr = device_->Malloc(64);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ptr.status().message()), HasSubstr("malloc"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  auto ri = EndCapture(stream.get());
  EXPECT_FALSE(ri.ok());
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
}

TEST_F(CudaCaptureTest, ThreadLocalCaptureAllowsOtherThreads) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kThreadLocal).ok());
  absl::Status other_thread;
  std::thread([&] {
    auto ptr = device_->Malloc(64);
    other_thread = ptr.status();
    if (ptr.ok()) other_thread = device_->Free(ptr.value());
  }).join();
  EXPECT_TRUE(other_thread.ok()) << other_thread;
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
  EXPECT_TRUE(EndCapture(stream.get()).ok());
}

TEST_F(CudaCaptureTest, SynchronizingTheCapturingStreamIsIllegalInRelaxedMode) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
  EXPECT_FALSE(stream->Synchronize().ok());
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(stream.get()).ok());
}

TEST_F(CudaCaptureTest, EndCaptureFromAnotherThreadIsRefusedAndTheCaptureGoesOn) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  absl::Status from_other;
  std::thread([&] { from_other = EndCapture(stream.get()).status(); }).join();
  EXPECT_THAT(std::string(from_other.message()), HasSubstr("wrong thread"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
  EXPECT_TRUE(EndCapture(stream.get()).ok());
}

TEST_F(CudaCaptureTest, ForkMustRejoinBeforeEndCapture) {
  float* buffer = DeviceFloats(1.0f);
  auto origin = NewStream();
  auto side = NewStream();
  auto fork = NewEvent();
  auto join = NewEvent();
  // Unjoined: EndCapture fails.
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(origin->RecordEvent(fork.get()).ok());
  ASSERT_TRUE(side->WaitEvent(fork.get()).ok());
  EXPECT_EQ(GetCaptureInfo(side.get()).status, CaptureStatus::kActive);
  ASSERT_TRUE(side->MemsetAsync(buffer, 0, kBytes).ok());
  EXPECT_FALSE(EndCapture(origin.get()).ok());
  EXPECT_EQ(GetCaptureInfo(side.get()).status, CaptureStatus::kNone);
  // Joined (on a fresh side stream: CUDA does not say in which state a failed end leaves an
  // unjoined stream): two streams in the instance, and the side stream's memset runs at replay.
  auto joined_side = NewStream();
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(origin->RecordEvent(fork.get()).ok());
  ASSERT_TRUE(joined_side->WaitEvent(fork.get()).ok());
  ASSERT_TRUE(joined_side->MemsetAsync(buffer, 0, kBytes).ok());
  ASSERT_TRUE(joined_side->RecordEvent(join.get()).ok());
  ASSERT_TRUE(origin->WaitEvent(join.get()).ok());
  auto ri = EndCapture(origin.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ((*ri)->NumStreams(), 2u);
  ExpectFloats(Read(buffer), std::vector<float>(kCount, 1.0f));
  ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
  ASSERT_TRUE(origin->Synchronize().ok());
  ExpectFloats(Read(buffer), std::vector<float>(kCount, 0.0f));
}

// §7.1, with CUDA's differences: the update applies to launches issued after EndTaskUpdate,
// and the external wait binds to the latest record issued before the launch.
TEST_F(CudaCaptureTest, Scenario1TaskGroupUpdateGatedByExternalEvent) {
  auto stream = NewStream();
  auto other_stream = NewStream();
  auto event = NewEvent(EventFlags::kExternal);
  float* self = DeviceFloats(0.0f);
  float* other = DeviceFloats(0.0f);
  float* tmp = DeviceFloats(0.0f);
  float* out = DeviceFloats(0.0f);
  auto add1 = PrepareBinary("Add", 1.1f);
  auto add2 = PrepareBinary("Add", 1.1f);
  auto add2_new = PrepareBinary("Add", 2.2f);
  const std::vector<float> self_values = SelfValues(), other_values(kCount, 2.0f);

  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
  ASSERT_TRUE(device_->Memcpy(self, self_values.data(), kBytes, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(device_->Memcpy(other, other_values.data(), kBytes, CopyKind::kHostToDevice).ok());
  const void* in1[] = {self, other};
  void* out1[] = {tmp};
  ASSERT_TRUE(stream->LaunchKernel(*add1, in1, out1, nullptr).ok());
  ASSERT_TRUE(stream->WaitEvent(event.get()).ok());
  ASSERT_TRUE(stream->ResetEvent(event.get()).ok());
  ASSERT_TRUE(stream->BeginTaskGroup().ok());
  const void* in2[] = {tmp, other};
  void* out2[] = {out};
  ASSERT_TRUE(stream->LaunchKernel(*add2, in2, out2, nullptr).ok());
  auto group = stream->EndTaskGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok()) << ri.status();

  ASSERT_TRUE(other_stream->RecordEvent(event.get()).ok());
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out), Plus(self_values, 4.4f));  // 5.4 6.4 ... 12.4

  ASSERT_TRUE(other_stream->BeginTaskUpdate(*group).ok());
  ASSERT_TRUE(other_stream->LaunchKernel(*add2_new, in2, out2, nullptr).ok());
  ASSERT_TRUE(other_stream->EndTaskUpdate().ok());
  ASSERT_TRUE(other_stream->RecordEvent(event.get()).ok());
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out), Plus(self_values, 6.6f));  // 7.6 8.6 ... 14.6

  // A mismatched update (a memset for a kernel) is refused and changes nothing.
  ASSERT_TRUE(other_stream->BeginTaskUpdate(*group).ok());
  ASSERT_TRUE(other_stream->MemsetAsync(out, 0, kBytes).ok());
  EXPECT_FALSE(other_stream->EndTaskUpdate().ok());
  ASSERT_TRUE(other_stream->RecordEvent(event.get()).ok());
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out), Plus(self_values, 6.6f));
}

class CudaConditionalTest : public CudaTest {
 protected:
  // Captures a parent with one conditional of `kind` whose bodies each run `fill` on out.
  void Capture(ConditionalKind kind, int bodies, uint32_t default_value, bool assign_default) {
    stream_ = NewStream();
    body_stream_ = NewStream();
    out_ = DeviceFloats(0.0f);
    other_ = DeviceFloats(2.0f);
    add_ = PrepareBinary("Add");
    ASSERT_TRUE(BeginCapture(stream_.get(), CaptureMode::kGlobal).ok());
    auto condition =
        GetCaptureInfo(stream_.get()).instance->CreateCondition(default_value, assign_default);
    ASSERT_TRUE(condition.ok()) << condition.status();
    condition_ = *condition;
    auto children = stream_->AddConditional(kind, condition_, bodies);
    ASSERT_TRUE(children.ok()) << children.status();
    for (int b = 0; b < bodies; ++b) {
      ASSERT_TRUE(body_stream_->BeginBodyCapture((*children)[b], CaptureMode::kGlobal).ok());
      if (kind == ConditionalKind::kWhile) {
        // out += 2, then clear the condition: one iteration per launch with value != 0.
        const void* in[] = {out_, other_};
        void* out[] = {out_};
        ASSERT_TRUE(body_stream_->LaunchKernel(*add_, in, out, nullptr).ok());
        ASSERT_TRUE(body_stream_->MemsetAsync(condition_.value, 0, sizeof(uint32_t)).ok());
      } else {
        // Body b fills out with the byte pattern b + 1.
        ASSERT_TRUE(body_stream_->MemsetAsync(out_, static_cast<uint8_t>(b + 1), kBytes).ok());
      }
      ASSERT_TRUE(body_stream_->EndBodyCapture().ok());
    }
    auto ri = EndCapture(stream_.get());
    ASSERT_TRUE(ri.ok()) << ri.status();
    ri_ = std::move(ri).value();
  }

  // Writes the condition, launches, and returns out's first byte.
  uint8_t Launch(uint32_t value) {
    EXPECT_TRUE(
        device_->Memcpy(condition_.value, &value, sizeof(value), CopyKind::kHostToDevice).ok());
    EXPECT_TRUE(device_->Memset(out_, 0, kBytes).ok());
    EXPECT_TRUE(ExecuteAsync(*ri_, stream_.get()).ok());
    EXPECT_TRUE(stream_->Synchronize().ok());
    uint8_t first = 0xff;
    EXPECT_TRUE(device_->Memcpy(&first, out_, 1, CopyKind::kDeviceToHost).ok());
    return first;
  }

  std::unique_ptr<Stream> stream_, body_stream_;
  float *out_ = nullptr, *other_ = nullptr;
  std::unique_ptr<PreparedKernel> add_;
  ConditionHandle condition_;
  std::unique_ptr<ModelRI> ri_;
};

TEST_F(CudaConditionalTest, IfElse) {
  Capture(ConditionalKind::kIf, 2, 0, false);
  ASSERT_NE(ri_, nullptr);
  EXPECT_EQ(Launch(1), 1);  // body 0
  EXPECT_EQ(Launch(0), 2);  // body 1 (else)
  CheckJsonWithPython(DumpJson(*ri_, DumpFlags::kSummary),
                      "c=[t for t in d[\"streams\"][0][\"tasks\"] if t[\"kind\"]==\"conditional\"];"
                      " assert len(c)==1 and len(c[0][\"bodies\"])==2");
}

TEST_F(CudaConditionalTest, SwitchRunsBodyKOrNone) {
  Capture(ConditionalKind::kSwitch, 3, 0, false);
  ASSERT_NE(ri_, nullptr);
  EXPECT_EQ(Launch(0), 1);
  EXPECT_EQ(Launch(2), 3);
  EXPECT_EQ(Launch(7), 0);  // out of range: no body
}

TEST_F(CudaConditionalTest, WhileRepeatsUntilTheBodyClearsTheValue) {
  Capture(ConditionalKind::kWhile, 1, 0, false);
  ASSERT_NE(ri_, nullptr);
  Launch(1);
  ExpectFloats(Read(out_), std::vector<float>(kCount, 2.0f));  // exactly one iteration
  Launch(0);
  ExpectFloats(Read(out_), std::vector<float>(kCount, 0.0f));  // none
}

TEST_F(CudaConditionalTest, AssignDefaultOverridesAHostWrite) {
  Capture(ConditionalKind::kIf, 1, 1, true);
  ASSERT_NE(ri_, nullptr);
  EXPECT_EQ(Launch(0), 1);  // reset to 1 at launch: body 0 runs anyway
}

TEST_F(CudaCaptureTest, Scenario3ExternalEventsAcrossInstances) {
  float* src = DeviceFloats(SelfValues());
  float* mid = DeviceFloats(0.0f);
  float* dst = DeviceFloats(0.0f);
  auto s1 = NewStream();
  auto s2 = NewStream();
  auto event = NewEvent(EventFlags::kExternal);
  // A: copy src -> mid, external record.
  ASSERT_TRUE(BeginCapture(s1.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(s1->MemcpyAsync(mid, src, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(s1->RecordEvent(event.get()).ok());
  auto a = EndCapture(s1.get());
  ASSERT_TRUE(a.ok()) << a.status();
  // B: external wait, copy mid -> dst.
  ASSERT_TRUE(BeginCapture(s2.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(s2->WaitEvent(event.get()).ok());
  ASSERT_TRUE(s2->MemcpyAsync(dst, mid, kBytes, CopyKind::kDeviceToDevice).ok());
  auto b = EndCapture(s2.get());
  ASSERT_TRUE(b.ok()) << b.status();
  CheckJsonWithPython(DumpJson(**b, DumpFlags::kSummary),
                      "t=d[\"streams\"][0][\"tasks\"]; assert t[0][\"kind\"]==\"event_wait\" and "
                      "t[0][\"external\"]; assert any(n[\"type\"]==\"event_wait\" for n in "
                      "d[\"graph\"][\"nodes\"])");
  ASSERT_TRUE(ExecuteAsync(**a, s1.get()).ok());
  ASSERT_TRUE(ExecuteAsync(**b, s2.get()).ok());
  ASSERT_TRUE(s2->Synchronize().ok());
  ExpectFloats(Read(dst), SelfValues());
  // (b): a stream outside waits on the instance's external record.
  float* dst2 = DeviceFloats(0.0f);
  ASSERT_TRUE(ExecuteAsync(**a, s1.get()).ok());
  ASSERT_TRUE(s2->WaitEvent(event.get()).ok());
  ASSERT_TRUE(s2->MemcpyAsync(dst2, mid, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(s2->Synchronize().ok());
  ExpectFloats(Read(dst2), SelfValues());
  ASSERT_TRUE(s1->Synchronize().ok());
}

TEST_F(CudaCaptureTest, Scenario4EnumerateAndMemset) {
  auto* buffer = static_cast<uint8_t*>(DeviceBytes(4096));
  ASSERT_TRUE(device_->Memset(buffer, 0xA5, 4096).ok());
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream->MemsetAsync(buffer, 0, 4096).ok());
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  ASSERT_EQ((*ri)->NumStreams(), 1u);
  std::vector<RiStreamInfo> streams(1);
  ASSERT_TRUE((*ri)->GetStreams(streams).ok());
  EXPECT_EQ(streams[0].num_tasks, 1u);
  std::vector<TaskInfo> none;
  absl::Status small = (*ri)->GetTasks(0, none);
  EXPECT_THAT(std::string(small.message()), HasSubstr("1 tasks"));
  std::vector<TaskInfo> tasks(1);
  ASSERT_TRUE((*ri)->GetTasks(0, tasks).ok());
  EXPECT_EQ(tasks[0].kind, TaskKind::kMemset);
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  std::vector<uint8_t> host(4096, 1);
  ASSERT_TRUE(device_->Memcpy(host.data(), buffer, 4096, CopyKind::kDeviceToHost).ok());
  EXPECT_EQ(host, std::vector<uint8_t>(4096, 0));
}

TEST_F(CudaCaptureTest, HostFunctionErrorIsReportedBySynchronize) {
  auto stream = NewStream();
  ASSERT_TRUE(
      stream->LaunchHostFunc([](void*) { return absl::InternalError("boom from host"); }, nullptr)
          .ok());
  absl::Status status = stream->Synchronize();
  EXPECT_THAT(std::string(status.message()), HasSubstr("boom from host"));
  EXPECT_TRUE(stream->Synchronize().ok());  // cleared
}

}  // namespace
}  // namespace reprise::runtime::cuda_testing
