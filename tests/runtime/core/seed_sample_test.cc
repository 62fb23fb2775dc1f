// The seed sample of capture_semantics.md §2, the JSON dump, enumeration and async errors.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

class SeedSampleTest : public CoreTest {
 protected:
  // Captures the simple model: async H2D of self from pinned memory (recorded), a synchronous
  // H2D of other in RELAXED thread mode (runs at once), add, mul.
  std::unique_ptr<ModelRI> CaptureSimpleModel(Stream* stream) {
    auto host_self = device_->MallocHost(kBytes);
    EXPECT_TRUE(host_self.ok());
    host_self_ = static_cast<float*>(host_self.value());
    for (int i = 0; i < kCount; ++i) host_self_[i] = static_cast<float>(i + 1);
    std::vector<float> host_other(kCount, 2.0f);
    self_ = DeviceFloats(0.0f);
    other_ = DeviceFloats(0.0f);
    tmp_ = DeviceFloats(0.0f);
    out_ = DeviceFloats(0.0f);
    add_ = PrepareBinary(device_, "Add", 1.1f);
    mul_ = PrepareBinary(device_, "Mul");

    EXPECT_TRUE(BeginCapture(stream, CaptureMode::kGlobal).ok());
    EXPECT_TRUE(stream->MemcpyAsync(self_, host_self_, kBytes, CopyKind::kHostToDevice).ok());
    CaptureMode mode = CaptureMode::kRelaxed;
    ExchangeThreadCaptureMode(&mode);
    EXPECT_EQ(mode, CaptureMode::kGlobal);
    EXPECT_TRUE(device_->Memcpy(other_, host_other.data(), kBytes, CopyKind::kHostToDevice).ok());
    ExchangeThreadCaptureMode(&mode);
    EXPECT_EQ(mode, CaptureMode::kRelaxed);
    EXPECT_EQ(ThreadCaptureMode(), CaptureMode::kGlobal);
    // The synchronous copy ran at once and was not recorded.
    ExpectFloats(Read(other_), std::vector<float>(kCount, 2.0f));
    const void* add_in[] = {self_, other_};
    void* add_out[] = {tmp_};
    EXPECT_TRUE(stream->LaunchKernel(*add_, add_in, add_out, nullptr).ok());
    const void* mul_in[] = {tmp_, other_};
    void* mul_out[] = {out_};
    EXPECT_TRUE(stream->LaunchKernel(*mul_, mul_in, mul_out, nullptr).ok());
    // Nothing ran: the self copy was recorded, not executed.
    ExpectFloats(Read(self_), std::vector<float>(kCount, 0.0f));
    auto ri = EndCapture(stream);
    EXPECT_TRUE(ri.ok()) << ri.status();
    return ri.ok() ? std::move(ri).value() : nullptr;
  }

  void TearDown() override {
    if (host_self_ != nullptr) {
      EXPECT_TRUE(device_->FreeHost(host_self_).ok());
    }
    CoreTest::TearDown();
  }

  float* host_self_ = nullptr;
  float *self_ = nullptr, *other_ = nullptr, *tmp_ = nullptr, *out_ = nullptr;
  std::unique_ptr<PreparedKernel> add_, mul_;
};

TEST_F(SeedSampleTest, FourReplaysEachGiveTheExpectedValues) {
  auto stream = NewStream();
  auto ri = CaptureSimpleModel(stream.get());
  ASSERT_NE(ri, nullptr);
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
  const std::vector<float> expected = {6.4f, 8.4f, 10.4f, 12.4f, 14.4f, 16.4f, 18.4f, 20.4f};
  std::vector<float> host_out(kCount);
  for (int loop = 1; loop <= 4; ++loop) {
    std::fill(out_, out_ + kCount, -1.0f);
    ASSERT_TRUE(ExecuteAsync(*ri, stream.get()).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    ASSERT_TRUE(device_->Memcpy(host_out.data(), out_, kBytes, CopyKind::kDeviceToHost).ok());
    ExpectFloats(host_out, expected);
  }
  // The recorded copy does run at replay: a new pinned input changes the result.
  for (int i = 0; i < kCount; ++i) host_self_[i] = 0.0f;
  ASSERT_TRUE(ExecuteAsync(*ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out_), std::vector<float>(kCount, (0.0f + 2.2f) * 2.0f));
}

TEST_F(SeedSampleTest, EnumeratesStreamsAndTasks) {
  auto stream = NewStream();
  auto ri = CaptureSimpleModel(stream.get());
  ASSERT_NE(ri, nullptr);
  ASSERT_EQ(ri->NumStreams(), 1u);
  std::vector<RiStreamInfo> streams(ri->NumStreams());
  ASSERT_TRUE(ri->GetStreams(streams).ok());
  EXPECT_EQ(streams[0].num_tasks, 3u);
  auto count = ri->NumTasks(0);
  ASSERT_TRUE(count.ok());
  ASSERT_EQ(*count, 3u);
  std::vector<TaskInfo> small(2);
  absl::Status too_small = ri->GetTasks(0, small);
  EXPECT_EQ(too_small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_small.message(), HasSubstr("3 needed"));
  std::vector<TaskInfo> tasks(*count);
  ASSERT_TRUE(ri->GetTasks(0, tasks).ok());
  EXPECT_EQ(tasks[0].kind, TaskKind::kCopy);
  EXPECT_EQ(tasks[1].kind, TaskKind::kKernel);
  EXPECT_EQ(tasks[1].op, "Add");
  EXPECT_EQ(tasks[2].op, "Mul");
  EXPECT_EQ(tasks[2].seq, 2u);
  EXPECT_FALSE(ri->NumTasks(1).ok());
}

TEST_F(SeedSampleTest, JsonDumpParsesAndListsEveryTaskWithItsKind) {
  auto stream = NewStream();
  auto ri = CaptureSimpleModel(stream.get());
  ASSERT_NE(ri, nullptr);
  const std::string summary = DumpJson(*ri, DumpFlags::kSummary);
  CheckJsonWithPython(summary,
                      "t=d[\"streams\"][0][\"tasks\"]; "
                      "assert [x[\"kind\"] for x in t]==[\"copy\",\"kernel\",\"kernel\"], t; "
                      "assert [x.get(\"op\") for x in t]==[None,\"Add\",\"Mul\"]; "
                      "assert [x[\"seq\"] for x in t]==[0,1,2]; "
                      "assert \"bytes\" not in t[0]");
  const std::string verbose = DumpJson(*ri, DumpFlags::kVerbose);
  CheckJsonWithPython(verbose,
                      "t=d[\"streams\"][0][\"tasks\"]; "
                      "assert t[0][\"direction\"]==\"h2d\" and t[0][\"bytes\"]==32; "
                      "assert len(t[1][\"inputs\"])==2; "
                      "assert t[2][\"outputs\"][0][\"shape\"]==\"[4,2]\"");
}

absl::Status FailingHostFunction(void*) { return absl::InternalError("disk on fire"); }

absl::Status CountingHostFunction(void* counter) {
  ++*static_cast<int*>(counter);
  return absl::OkStatus();
}

// A kernel whose Run fails.
class FailingKernel final : public PreparedKernel {
 public:
  absl::string_view op() const override { return "Explode"; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  absl::Status Run(const KernelArgs&) const override {
    return absl::InvalidArgumentError("bad value");
  }

 private:
  std::vector<TensorDesc> outputs_{TensorDesc{DataType::kFloat32, {1}}};
};

TEST_F(SeedSampleTest, AsyncKernelErrorNamesTheTaskAndSkipsLaterWork) {
  auto stream = NewStream();
  FailingKernel failing;
  float* out = DeviceFloats(0.0f);
  int counter = 0;
  void* outs[] = {out};
  ASSERT_TRUE(stream->LaunchHostFunc(&CountingHostFunction, &counter).ok());  // task #0
  ASSERT_TRUE(stream->LaunchKernel(failing, {}, outs, nullptr).ok());         // task #1
  ASSERT_TRUE(stream->LaunchHostFunc(&CountingHostFunction, &counter).ok());  // skipped
  absl::Status status = stream->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("task #1"));
  EXPECT_THAT(status.message(), HasSubstr("kernel \"Explode\""));
  EXPECT_THAT(status.message(), HasSubstr("bad value"));
  EXPECT_EQ(counter, 1);
  // The error was cleared: the stream works again.
  ASSERT_TRUE(stream->LaunchHostFunc(&CountingHostFunction, &counter).ok());
  EXPECT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(counter, 2);
}

TEST_F(SeedSampleTest, AsyncErrorInsideAReplayNamesInstanceAndTask) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  int counter = 0;
  ASSERT_TRUE(stream->LaunchHostFunc(&CountingHostFunction, &counter).ok());
  ASSERT_TRUE(stream->LaunchHostFunc(&FailingHostFunction, nullptr).ok());
  ASSERT_TRUE(stream->LaunchHostFunc(&CountingHostFunction, &counter).ok());
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  absl::Status status = stream->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("instance ", (*ri)->id())));
  EXPECT_THAT(status.message(), HasSubstr("task #1 (host_function)"));
  EXPECT_THAT(status.message(), HasSubstr("disk on fire"));
  EXPECT_EQ(counter, 1);
  EXPECT_TRUE(stream->Synchronize().ok());
}

TEST_F(SeedSampleTest, PinnedPoolReusesFreedBlocks) {
  auto first = device_->MallocHost(1000);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(device_->KindOf(*first), MemoryKind::kPinnedHost);
  EXPECT_EQ(device_->KindOf(static_cast<char*>(*first) + 999), MemoryKind::kPinnedHost);
  ASSERT_TRUE(device_->FreeHost(*first).ok());
  EXPECT_GT(device_->memory_stats().pinned_cached, 0u);
  auto second = device_->MallocHost(900);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*second) % 64, 0u);
  EXPECT_FALSE(device_->FreeHost(reinterpret_cast<void*>(16)).ok());
  ASSERT_TRUE(device_->FreeHost(*second).ok());
  int local = 0;
  EXPECT_EQ(device_->KindOf(&local), MemoryKind::kPageableHost);
  float* dev = DeviceFloats(1.0f);
  EXPECT_EQ(device_->KindOf(dev), MemoryKind::kDevice);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dev) % 64, 0u);
}

}  // namespace
}  // namespace reprise::runtime::testing
