// ModelRI::Execute on the CPU: an idle stream's execution runs on the calling thread, and the
// stream's order holds (work queued meanwhile waits for it; a busy stream's execution queues).
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/core/capture.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

// What a host function saw: the thread it ran on and its place in the order of all calls.
struct Probe {
  std::mutex mu;
  std::vector<std::pair<int, std::thread::id>> calls;  // (tag, thread)
  std::atomic<bool> started{false};
  std::atomic<bool> release{true};
};

struct Call {
  Probe* probe;
  int tag;
};

absl::Status Record(void* data) {
  auto* call = static_cast<Call*>(data);
  call->probe->started.store(true);
  while (!call->probe->release.load()) std::this_thread::yield();
  std::lock_guard<std::mutex> lock(call->probe->mu);
  call->probe->calls.emplace_back(call->tag, std::this_thread::get_id());
  return absl::OkStatus();
}

class ExecuteInlineTest : public CoreTest {
 protected:
  // An instance of one host function call tagged `tag`.
  std::unique_ptr<ModelRI> Capture(Stream* stream, Call* call) {
    EXPECT_TRUE(BeginCapture(stream, CaptureMode::kThreadLocal).ok());
    EXPECT_TRUE(stream->LaunchHostFunc(Record, call).ok());
    auto ri = EndCapture(stream);
    EXPECT_TRUE(ri.ok()) << ri.status();
    return ri.ok() ? std::move(ri).value() : nullptr;
  }
};

TEST_F(ExecuteInlineTest, AnIdleStreamRunsTheInstanceOnTheCallingThread) {
  auto stream = NewStream();
  Probe probe;
  Call call{&probe, 1};
  auto ri = Capture(stream.get(), &call);
  ASSERT_NE(ri, nullptr);
  ASSERT_TRUE(ri->Execute(stream.get()).ok());
  ASSERT_TRUE(ri->Execute(stream.get()).ok());
  ASSERT_EQ(probe.calls.size(), 2u);
  EXPECT_EQ(probe.calls[0].second, std::this_thread::get_id());
  EXPECT_EQ(probe.calls[1].second, std::this_thread::get_id());

  // ExecuteAsync still runs on the stream's worker.
  ASSERT_TRUE(ri->ExecuteAsync(stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ASSERT_EQ(probe.calls.size(), 3u);
  EXPECT_NE(probe.calls[2].second, std::this_thread::get_id());
}

TEST_F(ExecuteInlineTest, WorkQueuedDuringAnInlineRunWaitsForIt) {
  auto stream = NewStream();
  Probe probe;
  Call first{&probe, 1};
  Call second{&probe, 2};
  auto ri = Capture(stream.get(), &first);
  ASSERT_NE(ri, nullptr);
  probe.release.store(false);
  std::thread::id runner_id;
  std::thread runner([&] {
    runner_id = std::this_thread::get_id();
    EXPECT_TRUE(ri->Execute(stream.get()).ok());
  });
  while (!probe.started.load()) std::this_thread::yield();
  // The instance is running on `runner`: this call is queued on the stream and must run after.
  ASSERT_TRUE(stream->LaunchHostFunc(Record, &second).ok());
  probe.release.store(true);
  runner.join();
  ASSERT_TRUE(stream->Synchronize().ok());
  ASSERT_EQ(probe.calls.size(), 2u);
  EXPECT_EQ(probe.calls[0].first, 1);
  EXPECT_EQ(probe.calls[0].second, runner_id);  // in place, on the caller's thread
  EXPECT_EQ(probe.calls[1].first, 2);
}

TEST_F(ExecuteInlineTest, ExecuteRunsAfterWorkQueuedBeforeIt) {
  auto stream = NewStream();
  Probe probe;
  Call blocker{&probe, 1};
  Call instance_call{&probe, 2};
  auto ri = Capture(stream.get(), &instance_call);
  ASSERT_NE(ri, nullptr);
  probe.release.store(false);
  ASSERT_TRUE(stream->LaunchHostFunc(Record, &blocker).ok());
  while (!probe.started.load()) std::this_thread::yield();
  // The stream is busy: Execute queues behind the blocker (it cannot run in place before the
  // blocker ends, whenever the release below comes).
  std::thread releaser([&] { probe.release.store(true); });
  ASSERT_TRUE(ri->Execute(stream.get()).ok());  // waits for the blocker, then its own run
  releaser.join();
  ASSERT_EQ(probe.calls.size(), 2u);
  EXPECT_EQ(probe.calls[0].first, 1);
  EXPECT_EQ(probe.calls[1].first, 2);
}

TEST_F(ExecuteInlineTest, ACapturingStreamRefusesExecute) {
  auto stream = NewStream();
  auto other = NewStream();
  Probe probe;
  Call call{&probe, 1};
  auto ri = Capture(stream.get(), &call);
  ASSERT_NE(ri, nullptr);
  ASSERT_TRUE(BeginCapture(other.get(), CaptureMode::kThreadLocal).ok());
  absl::Status s = ri->Execute(other.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  ASSERT_TRUE(EndCapture(other.get()).ok());
  EXPECT_TRUE(probe.calls.empty());
}

}  // namespace
}  // namespace reprise::runtime::testing
