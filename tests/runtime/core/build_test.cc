// Built instances (runtime/core/build.h): the model-switch scenario of issue 23, the switch
// comparisons, parallel activation, and the errors BindStream / SwitchStream / BuildEnd define.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "runtime/core/build.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

absl::Status Count(void* counter) {
  ++*static_cast<int*>(counter);
  return absl::OkStatus();
}

class BuildTest : public CoreTest {
 protected:
  std::unique_ptr<ModelRI> Begin() {
    auto ri = BuildBegin(device_);
    EXPECT_TRUE(ri.ok()) << ri.status();
    return ri.ok() ? std::move(ri).value() : nullptr;
  }

  /// Device memory holding one `T`.
  template <typename T>
  T* DeviceValue(T value) {
    auto ptr = device_->Malloc(sizeof(T));
    EXPECT_TRUE(ptr.ok()) << ptr.status();
    std::memcpy(*ptr, &value, sizeof(T));
    allocations_.push_back(*ptr);
    return static_cast<T*>(*ptr);
  }

  /// A new build with `head` bound as HEAD and `others` as DEFAULT, in that order.
  std::unique_ptr<ModelRI> BeginWith(Stream* head, const std::vector<Stream*>& others) {
    auto ri = Begin();
    EXPECT_TRUE(BindStream(*ri, head, StreamBinding::kHead).ok());
    for (Stream* other : others) EXPECT_TRUE(BindStream(*ri, other, StreamBinding::kDefault).ok());
    return ri;
  }

  void EndAll(ModelRI& ri, const std::vector<Stream*>& streams) {
    for (Stream* stream : streams) ASSERT_TRUE(EndTask(ri, stream).ok());
  }
};

// The model-switch sample: five persistent streams; stream1 (HEAD) adds, copies num <- target
// and switches to stream3 (num == right1) or stream4 (num == right2); stream2 and stream3 each
// add and activate the end stream; stream4 activates stream2.
class ModelSwitchTest : public BuildTest {
 protected:
  void SetUp() override {
    BuildTest::SetUp();
    for (auto& stream : streams_) stream = NewStream();
    auto host = device_->MallocHost(2 * kBytes);
    ASSERT_TRUE(host.ok());
    host_ = static_cast<float*>(*host);
    std::fill(host_, host_ + kCount, 1.0f);               // self1, copied in by stream1
    std::fill(host_ + kCount, host_ + 2 * kCount, 2.0f);  // other, copied in by stream1
    self1_ = DeviceFloats(0.0f);
    self2_ = DeviceFloats(2.0f);
    self3_ = DeviceFloats(3.0f);
    other_ = DeviceFloats(0.0f);
    for (float*& out : out_) out = DeviceFloats(0.0f);
    right1_ = DeviceValue<int32_t>(1);
    right2_ = DeviceValue<int32_t>(2);
    num_ = DeviceValue<uint32_t>(0);
    target_ = DeviceValue<uint32_t>(0);
    add_ = PrepareBinary(device_, "Add", 1.2f);
    ASSERT_NE(add_, nullptr);
  }

  void TearDown() override {
    ri_.reset();
    EXPECT_TRUE(device_->FreeHost(host_).ok());
    BuildTest::TearDown();
  }

  absl::Status Add(Stream* stream, const float* self, float* out) {
    const void* inputs[] = {self, other_};
    void* outputs[] = {out};
    return stream->LaunchKernel(*add_, inputs, outputs, nullptr);
  }

  void Build() {
    ri_ = Begin();
    ASSERT_NE(ri_, nullptr);
    Stream* s1 = streams_[0].get();
    Stream* s2 = streams_[1].get();
    Stream* s3 = streams_[2].get();
    Stream* s4 = streams_[3].get();
    Stream* end = streams_[4].get();
    ASSERT_TRUE(BindStream(*ri_, s1, StreamBinding::kHead).ok());
    for (Stream* s : {s2, s3, s4, end})
      ASSERT_TRUE(BindStream(*ri_, s, StreamBinding::kDefault).ok());
    ASSERT_TRUE(s1->MemcpyAsync(self1_, host_, kBytes, CopyKind::kHostToDevice).ok());
    ASSERT_TRUE(s1->MemcpyAsync(other_, host_ + kCount, kBytes, CopyKind::kHostToDevice).ok());
    ASSERT_TRUE(Add(s1, self1_, out_[0]).ok());
    ASSERT_TRUE(s1->MemcpyAsync(num_, target_, sizeof(uint32_t), CopyKind::kDeviceToDevice).ok());
    ASSERT_TRUE(
        SwitchStream(num_, CompareOp::kEqual, right1_, SwitchDataType::kInt32, s3, s1).ok());
    ASSERT_TRUE(
        SwitchStream(num_, CompareOp::kEqual, right2_, SwitchDataType::kInt32, s4, s1).ok());
    ASSERT_TRUE(Add(s2, self2_, out_[1]).ok());
    ASSERT_TRUE(ActiveStream(end, s2).ok());
    ASSERT_TRUE(Add(s3, self3_, out_[2]).ok());
    ASSERT_TRUE(ActiveStream(end, s3).ok());
    ASSERT_TRUE(ActiveStream(s2, s4).ok());
    EndAll(*ri_, {s1, s2, s3, s4, end});
    // Nothing ran while building.
    ExpectFloats(Read(out_[0]), std::vector<float>(kCount, 0.0f));
    ExpectFloats(Read(self1_), std::vector<float>(kCount, 0.0f));
    ASSERT_TRUE(BuildEnd(*ri_).ok());
    for (auto& stream : streams_) ASSERT_TRUE(UnbindStream(*ri_, stream.get()).ok());
  }

  void Run(uint32_t target) {
    // The target is set through another stream, in stream order before the launch.
    auto setter = NewStream();
    auto pinned = device_->MallocHost(sizeof(uint32_t));
    ASSERT_TRUE(pinned.ok());
    std::memcpy(*pinned, &target, sizeof(target));
    ASSERT_TRUE(
        setter->MemcpyAsync(target_, *pinned, sizeof(uint32_t), CopyKind::kHostToDevice).ok());
    ASSERT_TRUE(setter->Synchronize().ok());
    ASSERT_TRUE(device_->FreeHost(*pinned).ok());
    ASSERT_TRUE(ExecuteAsync(*ri_, streams_[0].get()).ok());
    ASSERT_TRUE(streams_[0]->Synchronize().ok());
  }

  std::unique_ptr<Stream> streams_[5];
  std::unique_ptr<PreparedKernel> add_;
  std::unique_ptr<ModelRI> ri_;
  float* host_ = nullptr;
  float *self1_ = nullptr, *self2_ = nullptr, *self3_ = nullptr, *other_ = nullptr;
  float* out_[3] = {};
  int32_t *right1_ = nullptr, *right2_ = nullptr;
  uint32_t *num_ = nullptr, *target_ = nullptr;
};

TEST_F(ModelSwitchTest, SwitchesToStream3ThenToStream4) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_NO_FATAL_FAILURE(Run(1));
  ExpectFloats(Read(out_[0]), std::vector<float>(kCount, 3.4f));
  ExpectFloats(Read(out_[1]), std::vector<float>(kCount, 0.0f));  // stream2 never started
  ExpectFloats(Read(out_[2]), std::vector<float>(kCount, 5.4f));
  ASSERT_NO_FATAL_FAILURE(Run(2));
  ExpectFloats(Read(out_[1]), std::vector<float>(kCount, 4.4f));  // stream4 -> stream2
  // Neither value: both switches fall through, only stream1 runs.
  std::fill(out_[1], out_[1] + kCount, 0.0f);
  std::fill(out_[2], out_[2] + kCount, 0.0f);
  ASSERT_NO_FATAL_FAILURE(Run(7));
  ExpectFloats(Read(out_[0]), std::vector<float>(kCount, 3.4f));
  ExpectFloats(Read(out_[1]), std::vector<float>(kCount, 0.0f));
  ExpectFloats(Read(out_[2]), std::vector<float>(kCount, 0.0f));
}

TEST_F(ModelSwitchTest, EnumeratesAndDumpsLikeACapturedInstance) {
  ASSERT_NO_FATAL_FAILURE(Build());
  ASSERT_EQ(ri_->NumStreams(), 5u);
  std::vector<RiStreamInfo> streams(5);
  ASSERT_TRUE(ri_->GetStreams(streams).ok());
  std::vector<size_t> counts;
  for (const RiStreamInfo& info : streams) counts.push_back(info.num_tasks);
  EXPECT_EQ(counts, (std::vector<size_t>{6, 2, 2, 1, 0}));
  std::vector<TaskInfo> tasks(6);
  ASSERT_TRUE(ri_->GetTasks(0, tasks).ok());
  EXPECT_EQ(tasks[2].op, "Add");
  EXPECT_EQ(tasks[4].kind, TaskKind::kStreamSwitch);
  EXPECT_EQ(tasks[5].kind, TaskKind::kStreamSwitch);
  CheckJsonWithPython(
      DumpJson(*ri_, DumpFlags::kVerbose),
      "assert d[\"built\"] and d[\"backend\"]==\"cpu\" and d[\"num_streams\"]==5; "
      "s=d[\"streams\"]; assert [x.get(\"head\", False) for x in s]==[True]+[False]*4; "
      "t=s[0][\"tasks\"]; assert [x[\"kind\"] for x in t]==[\"copy\"]*2+[\"kernel\",\"copy\","
      "\"stream_switch\",\"stream_switch\"], t; "
      "assert (t[4][\"target\"], t[5][\"target\"])==(2,3); "
      "assert t[4][\"compare\"]==\"equal\" and t[4][\"dtype\"]==\"int32\" and \"rhs\" in t[4]; "
      "assert s[3][\"tasks\"][0]==dict(seq=0, kind=\"stream_activate\", target=1)");
}

TEST_F(BuildTest, EveryComparisonAndTypeDecidesTheJump) {
  struct Case {
    CompareOp op;
    SwitchDataType dtype;
    int64_t value;
    int64_t rhs;
    bool jumps;
  };
  const Case cases[] = {
      {CompareOp::kEqual, SwitchDataType::kInt32, 5, 5, true},
      {CompareOp::kNotEqual, SwitchDataType::kInt32, 5, 5, false},
      {CompareOp::kGreater, SwitchDataType::kInt32, -1, 1, false},
      {CompareOp::kGreater, SwitchDataType::kUint32, -1, 1, true},  // 0xffffffff > 1
      {CompareOp::kGreaterOrEqual, SwitchDataType::kInt64, 1ll << 40, 1ll << 40, true},
      {CompareOp::kLess, SwitchDataType::kInt64, -(1ll << 40), 0, true},
      {CompareOp::kLessOrEqual, SwitchDataType::kInt32, 3, 2, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(CompareOpName(c.op), " ", SwitchDataTypeName(c.dtype), " ", c.value,
                              " ", c.rhs));
    auto head = NewStream();
    auto jump = NewStream();
    int64_t* value = DeviceValue<int64_t>(0);
    int64_t* rhs = DeviceValue<int64_t>(0);
    // Little-endian: the low 4 bytes are the int32 / uint32 operand.
    std::memcpy(value, &c.value, sizeof(int64_t));
    std::memcpy(rhs, &c.rhs, sizeof(int64_t));
    int after_switch = 0;
    int jumped = 0;
    auto ri = Begin();
    ASSERT_TRUE(BindStream(*ri, head.get(), StreamBinding::kHead).ok());
    ASSERT_TRUE(BindStream(*ri, jump.get(), StreamBinding::kDefault).ok());
    ASSERT_TRUE(SwitchStream(value, c.op, rhs, c.dtype, jump.get(), head.get()).ok());
    ASSERT_TRUE(head->LaunchHostFunc(Count, &after_switch).ok());
    ASSERT_TRUE(jump->LaunchHostFunc(Count, &jumped).ok());
    EndAll(*ri, {head.get(), jump.get()});
    ASSERT_TRUE(BuildEnd(*ri).ok());
    auto exec = NewStream();
    ASSERT_TRUE(ExecuteAsync(*ri, exec.get()).ok());
    ASSERT_TRUE(exec->Synchronize().ok());
    EXPECT_EQ(jumped, c.jumps ? 1 : 0);
    EXPECT_EQ(after_switch, c.jumps ? 0 : 1);  // a jump stops the rest of the stream
  }
}

// ActiveStream starts the target in parallel: the HEAD stream waits on an event that only the
// activated stream records. Activating a stream twice in one launch runs it once.
TEST_F(BuildTest, ActivatedStreamRunsInParallelAndAtMostOncePerLaunch) {
  auto head = NewStream();
  auto side = NewStream();
  auto event = NewEvent();
  float* src = DeviceFloats(SelfValues());
  float* mid = DeviceFloats(0.0f);
  float* dst = DeviceFloats(0.0f);
  int side_runs = 0;
  auto ri = Begin();
  ASSERT_TRUE(BindStream(*ri, head.get(), StreamBinding::kHead).ok());
  ASSERT_TRUE(BindStream(*ri, side.get(), StreamBinding::kDefault).ok());
  ASSERT_TRUE(side->MemcpyAsync(mid, src, kBytes, CopyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(side->LaunchHostFunc(Count, &side_runs).ok());
  ASSERT_TRUE(side->RecordEvent(event.get()).ok());
  ASSERT_TRUE(ActiveStream(side.get(), head.get()).ok());
  ASSERT_TRUE(ActiveStream(side.get(), head.get()).ok());
  ASSERT_TRUE(head->WaitEvent(event.get()).ok());
  ASSERT_TRUE(head->MemcpyAsync(dst, mid, kBytes, CopyKind::kDeviceToDevice).ok());
  EndAll(*ri, {head.get(), side.get()});
  ASSERT_TRUE(BuildEnd(*ri).ok());
  auto exec = NewStream();
  for (int launch = 1; launch <= 3; ++launch) {
    std::fill(mid, mid + kCount, 0.0f);
    std::fill(dst, dst + kCount, 0.0f);
    ASSERT_TRUE(ExecuteAsync(*ri, exec.get()).ok());
    ASSERT_TRUE(exec->Synchronize().ok());
    ExpectFloats(Read(dst), SelfValues());
    EXPECT_EQ(side_runs, launch);
  }
}

TEST_F(BuildTest, BindAndRecordErrors) {
  auto ri = Begin();
  auto a = NewStream();
  auto b = NewStream();
  auto unbound = NewStream();
  EXPECT_EQ(BindStream(*ri, device_->default_stream(), StreamBinding::kHead).code(),
            absl::StatusCode::kInvalidArgument);
  auto capturing = NewStream();
  ASSERT_TRUE(BeginCapture(capturing.get(), CaptureMode::kRelaxed).ok());
  absl::Status busy = BindStream(*ri, capturing.get(), StreamBinding::kHead);
  EXPECT_THAT(std::string(busy.message()), HasSubstr("already capturing"));
  EXPECT_TRUE(EndCapture(capturing.get()).ok());

  ASSERT_TRUE(BindStream(*ri, a.get(), StreamBinding::kHead).ok());
  auto other_ri = Begin();
  absl::Status twice = BindStream(*other_ri, a.get(), StreamBinding::kHead);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr(absl::StrCat("already bound to instance ", ri->id())));

  int32_t* value = DeviceValue<int32_t>(0);
  absl::Status not_bound = ActiveStream(a.get(), unbound.get());
  EXPECT_EQ(not_bound.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_bound.message(), HasSubstr("not bound to an instance being built"));
  absl::Status unbound_target =
      SwitchStream(value, CompareOp::kEqual, value, SwitchDataType::kInt32, b.get(), a.get());
  EXPECT_EQ(unbound_target.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      unbound_target.message(),
      HasSubstr(absl::StrCat("target stream ", b->id(), " is not bound to instance ", ri->id())));
  EXPECT_EQ(
      SwitchStream(nullptr, CompareOp::kEqual, value, SwitchDataType::kInt32, a.get(), a.get())
          .code(),
      absl::StatusCode::kInvalidArgument);

  // A bound stream records; after EndTask it refuses.
  float* buffer = DeviceFloats(1.0f);
  ASSERT_TRUE(a->MemsetAsync(buffer, 0, kBytes).ok());
  ASSERT_TRUE(a->Synchronize().ok());  // waiting for a bound stream is harmless
  ExpectFloats(Read(buffer), std::vector<float>(kCount, 1.0f));
  ASSERT_TRUE(EndTask(*ri, a.get()).ok());
  absl::Status after_end = a->MemsetAsync(buffer, 0, kBytes);
  EXPECT_EQ(after_end.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(after_end.message(), HasSubstr("closed by EndTask"));
  EXPECT_EQ(EndTask(*ri, a.get()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(EndTask(*ri, b.get()).message(), HasSubstr("is not bound to instance"));

  // Not executable, not unbindable, while building.
  EXPECT_EQ(ExecuteAsync(*ri, unbound.get()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(UnbindStream(*ri, a.get()).message(), HasSubstr("still being built"));
  // A captured instance cannot be built into.
  ASSERT_TRUE(BeginCapture(capturing.get(), CaptureMode::kRelaxed).ok());
  auto captured = EndCapture(capturing.get());
  ASSERT_TRUE(captured.ok());
  EXPECT_THAT(BindStream(**captured, b.get(), StreamBinding::kHead).message(),
              HasSubstr("not being built"));
}

TEST_F(BuildTest, BuildEndRefusesWhatCouldNeverRunAndStaysOpen) {
  auto a = NewStream();
  auto b = NewStream();
  auto c = NewStream();
  {
    auto ri = Begin();
    EXPECT_THAT(BuildEnd(*ri).message(), HasSubstr("no stream is bound"));
    ASSERT_TRUE(BindStream(*ri, a.get(), StreamBinding::kDefault).ok());
    EXPECT_THAT(BuildEnd(*ri).message(), HasSubstr("was not ended with EndTask"));
    ASSERT_TRUE(EndTask(*ri, a.get()).ok());
    EXPECT_THAT(BuildEnd(*ri).message(), HasSubstr("no stream is bound as HEAD"));
  }
  // The instance is gone: its streams run eagerly again.
  float* buffer = DeviceFloats(1.0f);
  ASSERT_TRUE(a->MemsetAsync(buffer, 0, kBytes).ok());
  ASSERT_TRUE(a->Synchronize().ok());
  ExpectFloats(Read(buffer), std::vector<float>(kCount, 0.0f));

  int32_t* value = DeviceValue<int32_t>(1);
  {
    // A switch on a DEFAULT path that nothing starts.
    auto ri = BeginWith(a.get(), {b.get(), c.get()});
    ASSERT_TRUE(
        SwitchStream(value, CompareOp::kEqual, value, SwitchDataType::kInt32, c.get(), b.get())
            .ok());
    EndAll(*ri, {a.get(), b.get(), c.get()});
    absl::Status never = BuildEnd(*ri);
    EXPECT_EQ(never.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(never.message(), HasSubstr(absl::StrCat("stream ", b->id(), " (index 1)")));
    EXPECT_THAT(never.message(), HasSubstr("never starts"));
    EXPECT_THAT(never.message(), HasSubstr("a stream switch among them"));
  }
  {
    // a activates b, b activates c, c switches back to b: a cycle that could never end.
    auto ri = BeginWith(a.get(), {b.get(), c.get()});
    ASSERT_TRUE(ActiveStream(b.get(), a.get()).ok());
    ASSERT_TRUE(ActiveStream(c.get(), b.get()).ok());
    ASSERT_TRUE(
        SwitchStream(value, CompareOp::kEqual, value, SwitchDataType::kInt32, b.get(), c.get())
            .ok());
    EndAll(*ri, {a.get(), b.get(), c.get()});
    absl::Status cycle = BuildEnd(*ri);
    EXPECT_EQ(cycle.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(cycle.message(),
                HasSubstr(absl::StrCat("stream ", b->id(), " (index 1) -> stream ", c->id(),
                                       " (index 2) -> stream ", b->id(), " (index 1)")));
    EXPECT_THAT(cycle.message(), HasSubstr("WHILE"));
  }
  {
    // A failed BuildEnd leaves the build open: it can be fixed and ended.
    auto ri = BeginWith(a.get(), {b.get()});
    ASSERT_TRUE(EndTask(*ri, b.get()).ok());
    EXPECT_FALSE(BuildEnd(*ri).ok());  // a is not ended
    ASSERT_TRUE(ActiveStream(b.get(), a.get()).ok());
    ASSERT_TRUE(EndTask(*ri, a.get()).ok());
    ASSERT_TRUE(BuildEnd(*ri).ok());
    EXPECT_EQ(BuildEnd(*ri).code(), absl::StatusCode::kFailedPrecondition);
    absl::Status still_bound = a->MemsetAsync(buffer, 0, kBytes);
    EXPECT_THAT(still_bound.message(), HasSubstr("unbind the stream"));
    ASSERT_TRUE(UnbindStream(*ri, a.get()).ok());
    EXPECT_TRUE(a->MemsetAsync(buffer, 0, kBytes).ok());
  }
}

}  // namespace
}  // namespace reprise::runtime::testing
