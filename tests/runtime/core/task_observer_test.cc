// The task observer (task_observer.h): a replay reports each task it ran, on the stream that ran
// it, while an observer is installed, and nothing once it is removed.
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "runtime/core/status_macros.h"
#include "runtime/core/task_observer.h"
#include "tests/runtime/core/core_test_util.h"

namespace reprise::runtime::testing {
namespace {

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

class TaskObserverTest : public CoreTest {
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
  absl::StatusOr<std::unique_ptr<ModelRI>> CaptureForkJoin(Stream* origin, Stream* other) {
    const void* pair[] = {x_, y_};
    void* sum[] = {sum_};
    void* product[] = {product_};
    const void* both[] = {sum_, product_};
    void* out[] = {out_};
    RETURN_IF_ERROR(BeginCapture(origin, CaptureMode::kGlobal));
    RETURN_IF_ERROR(origin->RecordEvent(fork_.get()));
    RETURN_IF_ERROR(other->WaitEvent(fork_.get()));
    RETURN_IF_ERROR(other->LaunchKernel(*add_, pair, sum, nullptr));
    RETURN_IF_ERROR(origin->LaunchKernel(*mul_, pair, product, nullptr));
    RETURN_IF_ERROR(other->RecordEvent(join_.get()));
    RETURN_IF_ERROR(origin->WaitEvent(join_.get()));
    RETURN_IF_ERROR(origin->LaunchKernel(*add_, both, out, nullptr));
    return EndCapture(origin);
  }

  std::unique_ptr<PreparedKernel> add_, mul_;
  std::unique_ptr<Event> fork_ = nullptr, join_ = nullptr;
  float *x_, *y_, *sum_, *product_, *out_;
};

TEST_F(TaskObserverTest, ReplayReportsEveryTaskOnItsStreamOnlyWhileInstalled) {
  fork_ = NewEvent();
  join_ = NewEvent();
  auto origin = NewStream();
  auto other = NewStream();
  auto ri = CaptureForkJoin(origin.get(), other.get());
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
  ExpectFloats(Read(out_), {1 + 3 + 3, 2 + 3 + 6, 3 + 3 + 9, 4 + 3 + 12, 5 + 3 + 15, 6 + 3 + 18,
                            7 + 3 + 21, 8 + 3 + 24});

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

}  // namespace
}  // namespace reprise::runtime::testing
