// Fork/join across streams and task-group updates (capture_semantics.md §3, §4).
#include <string>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <omp.h>

#include "gmock/gmock.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/task_observer.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

using ::testing::HasSubstr;

class ForkJoinTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    add_ = PrepareBinary(device_, "Add");
    mul_ = PrepareBinary(device_, "Mul");
    x_ = DeviceFloats(SelfValues());
    y_ = DeviceFloats(3.0f);
    sum_ = DeviceFloats(0.0f);
    product_ = DeviceFloats(0.0f);
    out_ = DeviceFloats(0.0f);
  }

  // origin: fork ─▶ (other: sum = x + y) ‖ (origin: product = x * y) ─▶ join: out = sum + product
  absl::Status Enqueue(Stream* origin, Stream* other, Event* fork, Event* join) {
    const void* sum_in[] = {x_, y_};
    void* sum_out[] = {sum_};
    const void* product_in[] = {x_, y_};
    void* product_out[] = {product_};
    const void* out_in[] = {sum_, product_};
    void* out_out[] = {out_};
    if (absl::Status s = origin->RecordEvent(fork); !s.ok()) return s;
    if (absl::Status s = other->WaitEvent(fork); !s.ok()) return s;
    if (absl::Status s = other->LaunchKernel(*add_, sum_in, sum_out, nullptr); !s.ok()) return s;
    if (absl::Status s = origin->LaunchKernel(*mul_, product_in, product_out, nullptr); !s.ok()) {
      return s;
    }
    if (absl::Status s = other->RecordEvent(join); !s.ok()) return s;
    if (absl::Status s = origin->WaitEvent(join); !s.ok()) return s;
    return origin->LaunchKernel(*add_, out_in, out_out, nullptr);
  }

  std::unique_ptr<PreparedKernel> add_, mul_;
  float *x_, *y_, *sum_, *product_, *out_;
};

TEST_F(ForkJoinTest, TwoBranchesGiveTheSameResultAsEagerExecution) {
  auto origin = NewStream();
  auto other = NewStream();
  auto fork = NewEvent();
  auto join = NewEvent();
  ASSERT_TRUE(Enqueue(origin.get(), other.get(), fork.get(), join.get()).ok());
  ASSERT_TRUE(origin->Synchronize().ok());
  const std::vector<float> eager = Read(out_);
  std::vector<float> expected;
  for (float x : SelfValues()) expected.push_back((x + 3.0f) + x * 3.0f);
  ExpectFloats(eager, expected);

  std::fill(out_, out_ + kCount, 0.0f);
  std::fill(sum_, sum_ + kCount, 0.0f);
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(Enqueue(origin.get(), other.get(), fork.get(), join.get()).ok());
  EXPECT_EQ(GetCaptureInfo(other.get()).status, CaptureStatus::kActive);  // joined the capture
  auto ri = EndCapture(origin.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ(GetCaptureInfo(other.get()).status, CaptureStatus::kNone);
  ASSERT_EQ((*ri)->NumStreams(), 2u);
  EXPECT_EQ(*(*ri)->NumTasks(1), 3u);                          // wait, add, record
  ExpectFloats(Read(out_), std::vector<float>(kCount, 0.0f));  // nothing ran while capturing
  CheckJsonWithPython(DumpJson(**ri, DumpFlags::kVerbose),
                      "s=d[\"streams\"]; assert len(s)==2; "
                      "assert [t[\"kind\"] for t in s[1][\"tasks\"]]=="
                      "[\"event_wait\",\"kernel\",\"event_record\"]; "
                      "assert [t[\"kind\"] for t in s[0][\"tasks\"]]=="
                      "[\"event_record\",\"kernel\",\"event_wait\",\"kernel\"]");
  for (int i = 0; i < 3; ++i) {
    std::fill(out_, out_ + kCount, 0.0f);
    ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
    ASSERT_TRUE(origin->Synchronize().ok());
    ExpectFloats(Read(out_), eager);
  }
}

class RecordingObserver final : public TaskObserver {
 public:
  struct Seen {
    TaskTiming timing;
    std::thread::id thread;
  };
  void OnTask(const TaskTiming& timing) override {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(Seen{timing, std::this_thread::get_id()});
  }
  std::vector<Seen> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(seen_);
  }

 private:
  std::mutex mu_;
  std::vector<Seen> seen_;
};

// The task observer (task_observer.h): a replay reports each task it ran, on the stream that ran
// it, while an observer is installed, and nothing once it is removed.
TEST_F(ForkJoinTest, ReplayReportsEveryTaskToTheObserverOnlyWhileInstalled) {
  auto origin = NewStream();
  auto other = NewStream();
  auto fork = NewEvent();
  auto join = NewEvent();
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(Enqueue(origin.get(), other.get(), fork.get(), join.get()).ok());
  auto ri = EndCapture(origin.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  RecordingObserver observer;

  // Not installed: a launch reports nothing.
  ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
  ASSERT_TRUE(origin->Synchronize().ok());

  ASSERT_TRUE((*ri)->SetTaskObserver(&observer).ok());
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
    ASSERT_TRUE(origin->Synchronize().ok());
  }
  ASSERT_TRUE((*ri)->SetTaskObserver(nullptr).ok());
  ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
  ASSERT_TRUE(origin->Synchronize().ok());
  std::vector<float> expected;
  for (float x : SelfValues()) expected.push_back((x + 3.0f) + x * 3.0f);
  ExpectFloats(Read(out_), expected);

  const std::vector<RecordingObserver::Seen> seen = observer.Take();
  // Per launch: stream 0 record, mul, wait, add; stream 1 wait, add, record.
  ASSERT_EQ(seen.size(), 2u * 7u);
  std::vector<std::vector<const PreparedKernel*>> kernels(2);
  std::vector<std::thread::id> threads(2);
  int kernel_tasks = 0;
  for (const auto& s : seen) {
    const TaskTiming& t = s.timing;
    EXPECT_EQ(t.instance, (*ri)->id());
    ASSERT_TRUE(t.stream == 0 || t.stream == 1) << t.stream;
    EXPECT_LE(t.start_ns, t.end_ns);
    if (threads[t.stream] == std::thread::id()) threads[t.stream] = s.thread;
    EXPECT_EQ(s.thread, threads[t.stream]) << "stream " << t.stream << " changed threads";
    if (t.kind == TaskKind::kKernel) {
      ++kernel_tasks;
      kernels[t.stream].push_back(t.kernel);
    } else {
      EXPECT_EQ(t.kernel, nullptr);
    }
  }
  EXPECT_EQ(kernel_tasks, 6);
  EXPECT_NE(threads[0], threads[1]);  // each stream of the instance runs on its own thread
  EXPECT_THAT(kernels[0], ::testing::ElementsAre(mul_.get(), add_.get(), mul_.get(), add_.get()));
  EXPECT_THAT(kernels[1], ::testing::ElementsAre(add_.get(), add_.get()));
}

// Two flags; each branch sets its own and waits (bounded) for the other's.
struct Meeting {
  std::atomic<bool>* mine;
  std::atomic<bool>* theirs;
};

absl::Status Rendezvous(void* arg) {
  auto* meeting = static_cast<Meeting*>(arg);
  meeting->mine->store(true);
  // Both branches must be running at once for both flags to be seen; the bound only turns a
  // serialised replay into a failure instead of a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!meeting->theirs->load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError("the other branch never ran concurrently");
    }
    std::this_thread::yield();
  }
  return absl::OkStatus();
}

TEST_F(ForkJoinTest, BranchesRunConcurrentlyAtReplay) {
  auto origin = NewStream();
  auto other = NewStream();
  auto fork = NewEvent();
  auto join = NewEvent();
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(origin->RecordEvent(fork.get()).ok());
  ASSERT_TRUE(other->WaitEvent(fork.get()).ok());
  std::atomic<bool> a_ran{false}, b_ran{false};
  Meeting a_args{&a_ran, &b_ran};
  Meeting b_args{&b_ran, &a_ran};
  ASSERT_TRUE(origin->LaunchHostFunc(&Rendezvous, &a_args).ok());
  ASSERT_TRUE(other->LaunchHostFunc(&Rendezvous, &b_args).ok());
  ASSERT_TRUE(other->RecordEvent(join.get()).ok());
  ASSERT_TRUE(origin->WaitEvent(join.get()).ok());
  auto ri = EndCapture(origin.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  for (int i = 0; i < 3; ++i) {
    a_ran = false;
    b_ran = false;
    ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
    EXPECT_TRUE(origin->Synchronize().ok());
    EXPECT_TRUE(a_ran.load() && b_ran.load());
  }
}

// Where a host function ran: inside an OpenMP parallel region, and which member.
struct Placement {
  bool in_parallel = false;
  int member = -1;
};

absl::Status RecordPlacement(void* arg) {
  auto* placement = static_cast<Placement*>(arg);
  placement->in_parallel = omp_in_parallel() != 0;
  placement->member = omp_get_thread_num();
  return absl::OkStatus();
}

class TeamForkTest : public ForkJoinTest {
 protected:
  // Captures origin: fork ─▶ (helper k: host fn k, sum_k = x + y) ‖ (origin: product = x * y)
  // ─▶ joins ─▶ out = sum_0 + product. `mid_lane_event` adds an event that the first helper
  // records in the middle of its lane and the origin waits on.
  absl::StatusOr<std::unique_ptr<ModelRI>> CaptureFork(Stream* origin,
                                                       const std::vector<Stream*>& helpers,
                                                       bool mid_lane_event,
                                                       const std::vector<float*>& sums,
                                                       std::vector<Placement>& placements) {
    RETURN_IF_ERROR(BeginCapture(origin, CaptureMode::kGlobal));
    events_.push_back(NewEvent());
    Event* fork = events_.back().get();
    RETURN_IF_ERROR(origin->RecordEvent(fork));
    const void* xy[] = {x_, y_};
    for (size_t k = 0; k < helpers.size(); ++k) {
      void* sum_out[] = {sums[k]};
      RETURN_IF_ERROR(helpers[k]->WaitEvent(fork));
      RETURN_IF_ERROR(helpers[k]->LaunchHostFunc(&RecordPlacement, &placements[k]));
      RETURN_IF_ERROR(helpers[k]->LaunchKernel(*add_, xy, sum_out, nullptr));
      if (k == 0 && mid_lane_event) {
        events_.push_back(NewEvent());
        RETURN_IF_ERROR(helpers[k]->RecordEvent(events_.back().get()));
        RETURN_IF_ERROR(origin->WaitEvent(events_.back().get()));
        RETURN_IF_ERROR(helpers[k]->LaunchKernel(*add_, xy, sum_out, nullptr));
      }
    }
    void* product_out[] = {product_};
    RETURN_IF_ERROR(origin->LaunchKernel(*mul_, xy, product_out, nullptr));
    for (Stream* helper : helpers) {
      events_.push_back(NewEvent());
      RETURN_IF_ERROR(helper->RecordEvent(events_.back().get()));
      RETURN_IF_ERROR(origin->WaitEvent(events_.back().get()));
    }
    const void* out_in[] = {sums[0], product_};
    void* out_out[] = {out_};
    RETURN_IF_ERROR(origin->LaunchKernel(*add_, out_in, out_out, nullptr));
    return EndCapture(origin);
  }

  std::vector<std::unique_ptr<Event>> events_;
};

// A fork whose helpers only run their lanes between the fork and their joins replays on the
// launching thread's OpenMP team: helper k on member k + 1, with no thread of its own. Any other
// shape of fork (here an event in the middle of a lane) keeps a worker thread per helper. Both
// give the same values on every launch; a team of one (no active parallel level left) runs
// every lane on the launching thread.
TEST_F(TeamForkTest, ForkedLanesRunOnTheLaunchingThreadsTeam) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under ThreadSanitizer forks run on worker threads (libgomp is not instrumented)";
#endif
  std::vector<float> expected;
  for (float x : SelfValues()) expected.push_back((x + 3.0f) + x * 3.0f);
  for (const bool mid_lane_event : {false, true}) {
    SCOPED_TRACE(mid_lane_event ? "an event in the middle of a lane" : "lanes only");
    auto origin = NewStream();
    std::vector<std::unique_ptr<Stream>> owned;
    std::vector<Stream*> helpers;
    std::vector<float*> sums;
    for (int k = 0; k < 3; ++k) {
      owned.push_back(NewStream());
      helpers.push_back(owned.back().get());
      sums.push_back(DeviceFloats(0.0f));
    }
    std::vector<Placement> placements(helpers.size());
    auto ri = CaptureFork(origin.get(), helpers, mid_lane_event, sums, placements);
    ASSERT_TRUE(ri.ok()) << ri.status();
    ASSERT_EQ((*ri)->NumStreams(), 4u);
    for (int launch = 0; launch < 3; ++launch) {
      std::fill(out_, out_ + kCount, 0.0f);
      ASSERT_TRUE(ExecuteAsync(**ri, origin.get()).ok());
      ASSERT_TRUE(origin->Synchronize().ok());
      ExpectFloats(Read(out_), expected);
      for (size_t k = 0; k < helpers.size(); ++k) {
        ExpectFloats(Read(sums[k]), AddOther(SelfValues(), 1.5f));  // x + 3
        EXPECT_EQ(placements[k].in_parallel, !mid_lane_event) << "helper " << k;
        if (!mid_lane_event) {
          EXPECT_EQ(placements[k].member, static_cast<int>(k) + 1);
        }
      }
    }
    // No active level left on this thread (the ICV is the calling thread's; Execute on an idle
    // stream runs here): the fork's team has one thread, which runs every lane itself.
    const int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(0);
    std::fill(out_, out_ + kCount, 0.0f);
    const absl::Status executed = (*ri)->Execute(origin.get());
    omp_set_max_active_levels(levels);
    ASSERT_TRUE(executed.ok()) << executed;
    ExpectFloats(Read(out_), expected);
    for (size_t k = 0; k < helpers.size(); ++k) EXPECT_EQ(placements[k].member, 0);
  }
}

TEST_F(ForkJoinTest, UnjoinedForkMakesEndCaptureFail) {
  auto origin = NewStream();
  auto other = NewStream();
  auto fork = NewEvent();
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(origin->RecordEvent(fork.get()).ok());
  ASSERT_TRUE(other->WaitEvent(fork.get()).ok());
  const void* in[] = {x_, y_};
  void* out[] = {sum_};
  ASSERT_TRUE(other->LaunchKernel(*add_, in, out, nullptr).ok());
  // Ending on the forked stream is refused: the origin ends the capture.
  auto wrong = EndCapture(other.get());
  EXPECT_THAT(wrong.status().message(), HasSubstr("origin"));
  auto ri = EndCapture(origin.get());
  EXPECT_EQ(ri.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ri.status().message(), HasSubstr("has not rejoined"));
  EXPECT_EQ(GetCaptureInfo(origin.get()).status, CaptureStatus::kNone);
  EXPECT_EQ(GetCaptureInfo(other.get()).status, CaptureStatus::kNone);
  // Both streams work eagerly again.
  ASSERT_TRUE(other->LaunchKernel(*add_, in, out, nullptr).ok());
  ASSERT_TRUE(other->Synchronize().ok());
  ExpectFloats(Read(sum_), AddOther(SelfValues(), 1.5f));  // x + 3
}

TEST_F(ForkJoinTest, WaitOnANonExternalEventFromOutsideInvalidates) {
  auto origin = NewStream();
  auto outside = NewEvent();
  auto other = NewStream();
  ASSERT_TRUE(other->RecordEvent(outside.get()).ok());
  ASSERT_TRUE(BeginCapture(origin.get(), CaptureMode::kGlobal).ok());
  absl::Status status = origin->WaitEvent(outside.get());
  EXPECT_THAT(status.message(), HasSubstr("kExternal"));
  EXPECT_EQ(GetCaptureInfo(origin.get()).status, CaptureStatus::kInvalidated);
  EXPECT_FALSE(EndCapture(origin.get()).ok());
}

class TaskUpdateTest : public ForkJoinTest {};

TEST_F(TaskUpdateTest, UpdatedGroupComputesFromTheNewBuffers) {
  auto stream = NewStream();
  auto updater = NewStream();
  float* x2 = DeviceFloats(10.0f);
  float* y2 = DeviceFloats(5.0f);
  float* out2 = DeviceFloats(0.0f);
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  const void* sum_in[] = {x_, y_};
  void* sum_out[] = {sum_};
  ASSERT_TRUE(stream->LaunchKernel(*add_, sum_in, sum_out, nullptr).ok());
  ASSERT_TRUE(stream->BeginTaskGroup().ok());
  const void* out_in[] = {sum_, y_};
  void* out_out[] = {out_};
  ASSERT_TRUE(stream->LaunchKernel(*mul_, out_in, out_out, nullptr).ok());
  auto group = stream->EndTaskGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  auto ri = EndCapture(stream.get());
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ(group->instance, ri->get());

  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  std::vector<float> first;
  for (float x : SelfValues()) first.push_back((x + 3.0f) * 3.0f);
  ExpectFloats(Read(out_), first);

  // Re-point the group's Mul at other buffers: out2 = x2 * y2.
  ASSERT_TRUE(updater->BeginTaskUpdate(*group).ok());
  const void* new_in[] = {x2, y2};
  void* new_out[] = {out2};
  ASSERT_TRUE(updater->LaunchKernel(*mul_, new_in, new_out, nullptr).ok());
  ASSERT_TRUE(updater->EndTaskUpdate().ok());
  ASSERT_TRUE(updater->Synchronize().ok());
  std::fill(out_, out_ + kCount, -1.0f);
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out2), std::vector<float>(kCount, 50.0f));
  ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));  // no longer written

  // Mismatched updates are refused and leave the instance unchanged.
  ASSERT_TRUE(updater->BeginTaskUpdate(*group).ok());
  ASSERT_TRUE(updater->LaunchKernel(*mul_, new_in, new_out, nullptr).ok());
  ASSERT_TRUE(updater->LaunchKernel(*mul_, new_in, new_out, nullptr).ok());
  absl::Status too_many = updater->EndTaskUpdate();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.message(), HasSubstr("2 tasks given, the group has 1"));
  ASSERT_TRUE(updater->BeginTaskUpdate(*group).ok());
  ASSERT_TRUE(updater->MemsetAsync(out_, 0, kBytes).ok());
  absl::Status wrong_kind = updater->EndTaskUpdate();
  EXPECT_EQ(wrong_kind.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_kind.message(), HasSubstr("memset"));
  ASSERT_TRUE(updater->Synchronize().ok());
  ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));  // the memset did not run
  std::fill(out2, out2 + kCount, 0.0f);
  ASSERT_TRUE(ExecuteAsync(**ri, stream.get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectFloats(Read(out2), std::vector<float>(kCount, 50.0f));
  ExpectFloats(Read(out_), std::vector<float>(kCount, -1.0f));
}

TEST_F(TaskUpdateTest, GroupErrors) {
  auto stream = NewStream();
  EXPECT_FALSE(stream->BeginTaskGroup().ok());  // not capturing
  EXPECT_FALSE(stream->EndTaskGroup().ok());
  EXPECT_FALSE(stream->EndTaskUpdate().ok());
  ASSERT_TRUE(BeginCapture(stream.get(), CaptureMode::kGlobal).ok());
  ASSERT_TRUE(stream->BeginTaskGroup().ok());
  EXPECT_FALSE(stream->BeginTaskGroup().ok());  // already open
  auto ri = EndCapture(stream.get());           // a group left open
  EXPECT_THAT(ri.status().message(), HasSubstr("task group 0 was not ended"));
  EXPECT_FALSE(stream->BeginTaskUpdate(TaskGroup{}).ok());
}

}  // namespace
}  // namespace reprise::runtime::testing
