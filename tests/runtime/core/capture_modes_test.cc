// The mode table and the lifecycle errors of capture_semantics.md §1–§2.
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

// Runs `fn` on a new thread whose own capture mode is `thread_mode`, and waits for it.
void OnThread(CaptureMode thread_mode, const std::function<void()>& fn) {
  std::thread thread([&] {
    CaptureMode mode = thread_mode;
    ExchangeThreadCaptureMode(&mode);
    fn();
  });
  thread.join();
}

struct ModeCase {
  CaptureMode capture_mode;
  bool from_capturing_thread;
  CaptureMode thread_mode;
  bool refused;
};

// "<capture mode>_<same|other thread>_<that thread's mode>", short: ctest pads every line of
// its output to the longest test name.
std::string CaseName(const ::testing::TestParamInfo<ModeCase>& info) {
  const ModeCase& c = info.param;
  auto name = [](CaptureMode m) {
    return m == CaptureMode::kThreadLocal ? std::string("local") : std::string(CaptureModeName(m));
  };
  return absl::StrCat(name(c.capture_mode), c.from_capturing_thread ? "_same_" : "_other_",
                      name(c.thread_mode));
}

class ModeTableTest : public CoreTest, public ::testing::WithParamInterface<ModeCase> {};

// A synchronous copy (a potentially unsafe call) made while a capture is ACTIVE.
TEST_P(ModeTableTest, SynchronousCopyIsRefusedOrRunsAtOnce) {
  const ModeCase& c = GetParam();
  auto stream = NewStream();
  float* dst = DeviceFloats(0.0f);
  std::vector<float> src(kCount, 3.0f);
  ASSERT_TRUE(BeginCapture(stream.get(), c.capture_mode).ok());
  absl::Status status;
  auto call = [&] { status = device_->Memcpy(dst, src.data(), kBytes, CopyKind::kHostToDevice); };
  if (c.from_capturing_thread) {
    CaptureMode mode = c.thread_mode;
    ExchangeThreadCaptureMode(&mode);
    call();
    ExchangeThreadCaptureMode(&mode);
  } else {
    OnThread(c.thread_mode, call);
  }
  const CaptureInfo info = GetCaptureInfo(stream.get());
  if (c.refused) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("synchronous copy"));
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("on stream ", stream->id())));
    EXPECT_EQ(info.status, CaptureStatus::kInvalidated);
    ExpectFloats(Read(dst), std::vector<float>(kCount, 0.0f));
    auto ri = EndCapture(stream.get());
    EXPECT_FALSE(ri.ok());
    EXPECT_THAT(ri.status().message(), HasSubstr("invalidated"));
  } else {
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(info.status, CaptureStatus::kActive);
    ExpectFloats(Read(dst), std::vector<float>(kCount, 3.0f));  // ran at once
    auto ri = EndCapture(stream.get());
    ASSERT_TRUE(ri.ok()) << ri.status();
    EXPECT_EQ(*(*ri)->NumTasks(0), 0u);  // and was not recorded
  }
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
}

constexpr CaptureMode kG = CaptureMode::kGlobal;
constexpr CaptureMode kT = CaptureMode::kThreadLocal;
constexpr CaptureMode kR = CaptureMode::kRelaxed;

INSTANTIATE_TEST_SUITE_P(
    Modes, ModeTableTest,
    ::testing::Values(
        // GLOBAL: every thread is refused unless its own mode is RELAXED.
        ModeCase{kG, true, kG, true}, ModeCase{kG, true, kR, false}, ModeCase{kG, false, kG, true},
        ModeCase{kG, false, kR, false}, ModeCase{kG, false, kT, true},
        // THREAD_LOCAL: only the capturing thread is refused (unless it is RELAXED).
        ModeCase{kT, true, kG, true}, ModeCase{kT, true, kR, false}, ModeCase{kT, false, kG, false},
        ModeCase{kT, false, kR, false},
        // RELAXED: nobody is refused.
        ModeCase{kR, true, kG, false}, ModeCase{kR, true, kR, false},
        ModeCase{kR, false, kG, false}, ModeCase{kR, false, kR, false}),
    CaseName);

// Every kind of potentially unsafe call is refused under a GLOBAL capture and invalidates it.
TEST_F(CoreTest, EveryUnsafeCallIsRefusedUnderGlobalCapture) {
  auto other = NewStream();
  auto event = NewEvent();
  float* buffer = DeviceFloats(0.0f);
  std::vector<float> pageable(kCount, 1.0f);
  const std::vector<std::pair<std::string, std::function<absl::Status()>>> calls = {
      {"synchronous memset", [&] { return device_->Memset(buffer, 0, kBytes); }},
      {"stream synchronize", [&] { return other->Synchronize(); }},
      {"stream query", [&] { return other->Query().status(); }},
      {"event synchronize", [&] { return event->Synchronize(); }},
      {"event query", [&] { return event->Query().status(); }},
      {"device synchronize", [&] { return device_->Synchronize(); }},
      {"device malloc", [&] { return device_->Malloc(64).status(); }},
      {"device free", [&] { return device_->Free(buffer); }},
      {"pinned host malloc", [&] { return device_->MallocHost(64).status(); }},
      {"pageable host memory",
       [&] {
         return other->MemcpyAsync(buffer, pageable.data(), kBytes, CopyKind::kHostToDevice);
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    auto stream = NewStream();
    ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
    absl::Status status = call();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr(name));
    EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
    EXPECT_FALSE(EndCapture(stream.get()).ok());
  }
}

// Illegal in every mode, even RELAXED capture with a RELAXED thread.
TEST_F(CoreTest, SyncOrQueryOfTheCapturingStreamIsIllegalInEveryMode) {
  CaptureMode mode = CaptureMode::kRelaxed;
  ExchangeThreadCaptureMode(&mode);
  for (int which = 0; which < 2; ++which) {
    auto stream = NewStream();
    ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
    absl::Status status = which == 0 ? stream->Synchronize() : stream->Query().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("illegal in every mode"));
    EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
    EXPECT_FALSE(EndCapture(stream.get()).ok());
    EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
  }
  ExchangeThreadCaptureMode(&mode);
}

TEST_F(CoreTest, SyncOfAnEventRecordedInsideTheCaptureIsIllegalInEveryMode) {
  CaptureMode mode = CaptureMode::kRelaxed;
  ExchangeThreadCaptureMode(&mode);
  auto stream = NewStream();
  auto event = NewEvent();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
  ASSERT_TRUE(stream->RecordEvent(event.get()).ok());
  absl::Status status = event->Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("event recorded inside"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(stream.get()).ok());
  ExchangeThreadCaptureMode(&mode);
}

TEST_F(CoreTest, PageableCopyOnTheCapturingStreamIsNeverRecorded) {
  auto stream = NewStream();
  float* buffer = DeviceFloats(0.0f);
  std::vector<float> pageable(kCount, 1.0f);
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
  absl::Status status =
      stream->MemcpyAsync(buffer, pageable.data(), kBytes, CopyKind::kHostToDevice);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("pageable"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(stream.get()).ok());
}

TEST_F(CoreTest, ExchangeThreadCaptureModeSwapsAndStartsGlobal) {
  OnThread(CaptureMode::kGlobal, [] {
    // OnThread already set GLOBAL (a no-op swap); a fresh thread starts as GLOBAL.
    EXPECT_EQ(ThreadCaptureMode(), CaptureMode::kGlobal);
    CaptureMode mode = CaptureMode::kThreadLocal;
    ExchangeThreadCaptureMode(&mode);
    EXPECT_EQ(mode, CaptureMode::kGlobal);
    EXPECT_EQ(ThreadCaptureMode(), CaptureMode::kThreadLocal);
    ExchangeThreadCaptureMode(&mode);
    EXPECT_EQ(mode, CaptureMode::kThreadLocal);
    EXPECT_EQ(ThreadCaptureMode(), CaptureMode::kGlobal);
  });
}

TEST_F(CoreTest, EndCaptureFromTheWrongThreadFailsAndTheCaptureGoesOn) {
  for (CaptureMode capture_mode : {CaptureMode::kGlobal, CaptureMode::kThreadLocal}) {
    auto stream = NewStream();
    ASSERT_TRUE(BeginCapture(stream.get(), capture_mode).ok());
    absl::StatusOr<std::unique_ptr<ModelRI>> ri;
    OnThread(CaptureMode::kGlobal, [&] { ri = EndCapture(stream.get()); });
    EXPECT_EQ(ri.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(ri.status().message(), HasSubstr("wrong thread"));
    EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
    EXPECT_TRUE(EndCapture(stream.get()).ok());
  }
  // RELAXED: any thread may end it.
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kRelaxed).ok());
  absl::StatusOr<std::unique_ptr<ModelRI>> ri;
  OnThread(CaptureMode::kGlobal, [&] { ri = EndCapture(stream.get()); });
  EXPECT_TRUE(ri.ok()) << ri.status();
}

TEST_F(CoreTest, CaptureOnACapturingStreamFailsAndChangesNothing) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  const CaptureInfo before = GetCaptureInfo(stream.get());
  ASSERT_NE(before.instance, nullptr);
  absl::Status status = BeginCapture(stream.get(), CaptureMode::kRelaxed);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("already capturing"));
  const CaptureInfo after = GetCaptureInfo(stream.get());
  EXPECT_EQ(after.status, CaptureStatus::kActive);
  EXPECT_EQ(after.instance, before.instance);
  EXPECT_TRUE(EndCapture(stream.get()).ok());
}

TEST_F(CoreTest, EndingAnInvalidatedCaptureFailsAndReturnsToNone) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ASSERT_FALSE(device_->Synchronize().ok());
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  // Recording into an invalidated capture is refused too.
  float* buffer = DeviceFloats(0.0f);
  EXPECT_FALSE(stream->MemsetAsync(buffer, 0, kBytes).ok());
  auto ri = EndCapture(stream.get());
  EXPECT_EQ(ri.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ri.status().message(), HasSubstr("device synchronize"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
  EXPECT_EQ(GetCaptureInfo(stream.get()).instance, nullptr);
  // The stream works eagerly again, and can capture again.
  ASSERT_TRUE(stream->MemsetAsync(buffer, 0, kBytes).ok());
  EXPECT_TRUE(stream->Synchronize().ok());
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  EXPECT_TRUE(EndCapture(stream.get()).ok());
}

TEST_F(CoreTest, CaptureOnTheDefaultStreamFails) {
  absl::Status status = BeginCapture(device_->default_stream(), CaptureMode::kGlobal);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("default stream"));
  EXPECT_EQ(GetCaptureInfo(device_->default_stream()).status, CaptureStatus::kNone);
}

TEST_F(CoreTest, EndCaptureOnANonCapturingStreamFails) {
  auto stream = NewStream();
  auto ri = EndCapture(stream.get());
  EXPECT_EQ(ri.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ri.status().message(), HasSubstr("not capturing"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kNone);
}

TEST_F(CoreTest, AnInstanceCannotRunWhileCapturedOrOnACapturingStream) {
  auto stream = NewStream();
  auto capturing = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ModelRI* filling = GetCaptureInfo(stream.get()).instance;
  ASSERT_NE(filling, nullptr);
  EXPECT_FALSE(filling->ExecuteAsync(capturing.get()).ok());
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok());
  ASSERT_TRUE(BeginCapture(capturing.get(), CaptureMode::kGlobal).ok());
  EXPECT_EQ((*ri)->ExecuteAsync(capturing.get()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(EndCapture(capturing.get()).ok());
}

}  // namespace
}  // namespace reprise::runtime::testing
