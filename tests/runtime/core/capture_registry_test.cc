// The capture registry's rules across backends: a capture on one backend's stream refuses (or
// permits) unsafe calls made on another backend's stream exactly as capture.h's table says. The
// second backend is a stand-in (no GPU here) that, like the CUDA backend, keeps no capture rules
// of its own: it registers its captures with the registry and asks it before an unsafe call.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "runtime/core/capture_registry.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

// A stream of a stand-in backend: only capture and Synchronize do anything.
class StandInStream final : public Stream {
 public:
  Device* device() const override { return nullptr; }
  uint64_t id() const override { return 900001; }

  absl::Status MemcpyAsync(void*, const void*, size_t, CopyKind) override { return Refused(); }
  absl::Status MemsetAsync(void*, uint8_t, size_t) override { return Refused(); }
  absl::Status LaunchKernel(const PreparedKernel&, std::span<const void* const>,
                            std::span<void* const>, void*) override {
    return Refused();
  }
  absl::Status LaunchHostFunc(HostFn, void*) override { return Refused(); }
  absl::Status RecordEvent(Event*) override { return Refused(); }
  absl::Status WaitEvent(Event*) override { return Refused(); }
  absl::Status ResetEvent(Event*) override { return Refused(); }

  // The unsafe call: the registry decides, as for every backend.
  absl::Status Synchronize() override {
    ++synchronized_;
    std::lock_guard<std::mutex> lock(CaptureMutex());
    const std::string call = "stream synchronize (stand-in stream 900001)";
    if (capture_ != nullptr) return RefuseOnCapturingStreamLocked(capture_.get(), call);
    return CheckUnsafeCallLocked(call);
  }
  absl::StatusOr<bool> Query() override { return Refused(); }

  absl::Status BeginCapture(CaptureMode mode) override {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    capture_ = std::make_shared<CaptureRecord>();
    capture_->id = NextCaptureId();
    capture_->origin = "stand-in stream 900001";
    capture_->mode = mode;
    capture_->thread = std::this_thread::get_id();
    AddActiveCapture(capture_);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<ModelRI>> EndCapture() override {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    RemoveActiveCapture(capture_.get());
    capture_->ended = true;
    const bool invalidated = capture_->status == CaptureStatus::kInvalidated;
    const std::string reason = capture_->invalid_reason;
    capture_.reset();
    if (invalidated) return absl::FailedPreconditionError(absl::StrCat("invalidated: ", reason));
    return absl::UnimplementedError("the stand-in makes no instance");
  }
  CaptureInfo GetCaptureInfo() override {
    std::lock_guard<std::mutex> lock(CaptureMutex());
    return capture_ == nullptr ? CaptureInfo{} : CaptureInfo{capture_->status, nullptr};
  }
  absl::Status BeginBodyCapture(ModelRI*, CaptureMode) override { return Refused(); }
  absl::Status EndBodyCapture() override { return Refused(); }
  absl::StatusOr<std::vector<ModelRI*>> AddConditional(ConditionalKind, ConditionHandle,
                                                       int) override {
    return Refused();
  }
  absl::Status BeginTaskGroup() override { return Refused(); }
  absl::StatusOr<TaskGroup> EndTaskGroup() override { return Refused(); }
  absl::Status BeginTaskUpdate(TaskGroup) override { return Refused(); }
  absl::Status EndTaskUpdate() override { return Refused(); }

  int synchronized() const { return synchronized_; }

 private:
  static absl::Status Refused() { return absl::UnimplementedError("stand-in stream"); }

  std::shared_ptr<CaptureRecord> capture_;
  int synchronized_ = 0;
};

class CaptureRegistryTest : public CoreTest {
 protected:
  StandInStream other_backend_;
};

TEST_F(CaptureRegistryTest, CpuGlobalCaptureRefusesAnUnsafeCallOnAnotherBackendsStream) {
  auto stream = NewStream();
  const size_t before = ActiveCaptureCount();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  EXPECT_EQ(ActiveCaptureCount(), before + 1);

  absl::Status status = other_backend_.Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("stand-in stream 900001"));
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("(global) on stream ", stream->id())));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  auto ri = EndCapture(stream.get());
  ASSERT_FALSE(ri.ok());
  EXPECT_THAT(ri.status().message(), HasSubstr("stand-in stream"));
  EXPECT_EQ(ActiveCaptureCount(), before);

  // With no capture active the same call is permitted.
  EXPECT_TRUE(other_backend_.Synchronize().ok());
}

TEST_F(CaptureRegistryTest, AnotherBackendsGlobalCaptureRefusesCpuUnsafeCalls) {
  auto stream = NewStream();
  ASSERT_TRUE(other_backend_.BeginCapture(CaptureMode::kGlobal).ok());
  auto ptr = device_->Malloc(64);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ptr.status().message(), HasSubstr("device malloc"));
  EXPECT_THAT(ptr.status().message(), HasSubstr("capture"));
  EXPECT_THAT(ptr.status().message(), HasSubstr("on stand-in stream 900001"));
  EXPECT_EQ(other_backend_.GetCaptureInfo().status, CaptureStatus::kInvalidated);
  ASSERT_EQ(other_backend_.EndCapture().status().code(), absl::StatusCode::kFailedPrecondition);
  // A CPU stream synchronise is refused too (not the capturing stream: the mode table applies).
  ASSERT_TRUE(other_backend_.BeginCapture(CaptureMode::kGlobal).ok());
  EXPECT_EQ(stream->Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(other_backend_.EndCapture().ok());
  EXPECT_TRUE(stream->Synchronize().ok());
}

TEST_F(CaptureRegistryTest, RelaxedThreadModePermitsTheCallAcrossBackends) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  CaptureMode mode = CaptureMode::kRelaxed;
  ExchangeThreadCaptureMode(&mode);
  EXPECT_TRUE(other_backend_.Synchronize().ok());
  ExchangeThreadCaptureMode(&mode);
  EXPECT_EQ(mode, CaptureMode::kRelaxed);  // the exchange wrote the previous mode back
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
  EXPECT_EQ(other_backend_.synchronized(), 1);
  auto ri = EndCapture(stream.get());
  EXPECT_TRUE(ri.ok()) << ri.status();
}

TEST_F(CaptureRegistryTest, ThreadLocalCaptureRefusesOnlyTheCapturingThreadAcrossBackends) {
  auto stream = NewStream();
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kThreadLocal).ok());
  absl::Status from_other_thread;
  std::thread thread([&] { from_other_thread = other_backend_.Synchronize(); });
  thread.join();
  EXPECT_TRUE(from_other_thread.ok()) << from_other_thread;
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kActive);
  absl::Status from_capturing_thread = other_backend_.Synchronize();
  EXPECT_EQ(from_capturing_thread.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(from_capturing_thread.message(), HasSubstr("(thread_local)"));
  EXPECT_EQ(GetCaptureInfo(stream.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(stream.get()).ok());
}

TEST_F(CaptureRegistryTest, RelaxedCaptureOnAnotherBackendRefusesNothing) {
  ASSERT_TRUE(other_backend_.BeginCapture(CaptureMode::kRelaxed).ok());
  auto ptr = device_->Malloc(64);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  EXPECT_TRUE(device_->Free(*ptr).ok());
  EXPECT_EQ(other_backend_.GetCaptureInfo().status, CaptureStatus::kActive);
  EXPECT_EQ(other_backend_.EndCapture().status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace reprise::runtime::testing
