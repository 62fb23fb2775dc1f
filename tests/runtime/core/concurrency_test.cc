// Many threads capturing and replaying on their own streams at once (run under TSan too).
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 10;
constexpr int kReplays = 5;

TEST_F(CoreTest, ManyThreadsCaptureAndReplayOnTheirOwnStreams) {
  auto add = PrepareBinary(device_, "Add", 1.1f);
  auto mul = PrepareBinary(device_, "Mul");
  struct PerThread {
    std::unique_ptr<Stream> stream;
    float *self, *other, *tmp, *out;
  };
  std::vector<PerThread> threads(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads[t].stream = NewStream();
    threads[t].self = DeviceFloats(static_cast<float>(t));
    threads[t].other = DeviceFloats(2.0f);
    threads[t].tmp = DeviceFloats(0.0f);
    threads[t].out = DeviceFloats(0.0f);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      PerThread& me = threads[t];
      for (int round = 0; round < kRounds; ++round) {
        // THREAD_LOCAL: the other threads' synchronisations do not disturb this capture.
        if (!BeginCapture(me.stream.get(), CaptureMode::kThreadLocal).ok()) ++failures;
        const void* add_in[] = {me.self, me.other};
        void* add_out[] = {me.tmp};
        const void* mul_in[] = {me.tmp, me.other};
        void* mul_out[] = {me.out};
        if (!me.stream->LaunchKernel(*add, add_in, add_out, nullptr).ok()) ++failures;
        if (!me.stream->LaunchKernel(*mul, mul_in, mul_out, nullptr).ok()) ++failures;
        auto ri = EndCapture(me.stream.get());
        if (!ri.ok()) {
          ADD_FAILURE() << ri.status();
          ++failures;
          continue;
        }
        for (int replay = 0; replay < kReplays; ++replay) {
          std::fill(me.out, me.out + kCount, 0.0f);
          if (!ExecuteAsync(**ri, me.stream.get()).ok()) ++failures;
          absl::Status status = me.stream->Synchronize();
          if (!status.ok()) {
            ADD_FAILURE() << status;
            ++failures;
          }
          const float expected = (static_cast<float>(t) + 2.2f) * 2.0f;
          for (int i = 0; i < kCount; ++i) {
            if (std::abs(me.out[i] - expected) > 1e-4) ++failures;
          }
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(failures.load(), 0);
}

// One instance launched from several threads on several streams: the executions queue behind
// each other and each one computes the right result.
TEST_F(CoreTest, OneInstanceLaunchedOnManyStreamsRunsOneAtATime) {
  auto add = PrepareBinary(device_, "Add");
  float* acc = DeviceFloats(0.0f);
  float* one = DeviceFloats(0.5f);  // acc += 0.5 per launch
  auto capture_stream = NewStream();
  ASSERT_TRUE(BeginCapture(capture_stream.get(), CaptureMode::kGlobal).ok());
  const void* in[] = {acc, one};
  void* out[] = {acc};
  ASSERT_TRUE(capture_stream->LaunchKernel(*add, in, out, nullptr).ok());
  auto ri = EndCapture(capture_stream.get());
  ASSERT_TRUE(ri.ok());
  std::vector<std::unique_ptr<Stream>> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(NewStream());
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) EXPECT_TRUE(ExecuteAsync(**ri, streams[t].get()).ok());
      EXPECT_TRUE(streams[t]->Synchronize().ok());
    });
  }
  for (auto& worker : workers) worker.join();
  // Read-modify-write launches were never interleaved: every one of them counted.
  ExpectFloats(Read(acc), std::vector<float>(kCount, kThreads * 25 * 0.5f));
}

// Destroying the ModelRI while executions are pending is safe: they still run.
TEST_F(CoreTest, InstanceOutlivesItsHandleWhileExecutionsArePending) {
  auto stream = NewStream();
  auto gate = NewEvent(EventFlags::kExternal);
  auto other = NewStream();
  float* buffer = DeviceFloats(0.0f);
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream->WaitEvent(gate.get()).ok());
  ASSERT_TRUE(stream->MemsetAsync(buffer, 0x3F, kBytes).ok());
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok());
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ri->reset();
  ASSERT_TRUE(other->RecordEvent(gate.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(reinterpret_cast<uint8_t*>(buffer)[kBytes - 1], 0x3F);
}

}  // namespace
}  // namespace reprise::runtime::testing
