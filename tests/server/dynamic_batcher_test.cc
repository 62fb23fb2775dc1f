// DynamicBatcher: the scheduling policy stepped by hand on an injected clock (no threads, no
// sleeps), then the threaded mode under concurrent clients (run under the tsan preset).
#include "server/dynamic_batcher.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/notification.h"

namespace reprise::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kUs = 1000;

// How a request was answered; outlives the request, which the batcher owns.
struct Outcome {
  absl::Status rejected;
  Notification done;
  bool destroyed = false;                // the batcher destroyed the request
  bool destroyed_before_answer = false;  // ... before calling the rejection's answer
};

// A queued request that records its rejection in its Outcome.
class Item final : public BatchItem {
 public:
  Item(int id_in, Outcome* outcome, int64_t rows_in = 1, std::string key = "k")
      : id(id_in), outcome_(outcome) {
    rows = rows_in;
    batch_key = std::move(key);
  }
  ~Item() override { outcome_->destroyed = true; }
  absl::AnyInvocable<void() &&> Reject(absl::Status s) override {
    return [o = outcome_, s = std::move(s)]() mutable {
      o->destroyed_before_answer = o->destroyed;
      o->rejected = std::move(s);
      o->done.Notify();
    };
  }
  /// Runs `item`: destroys it, then tells its client (who may then drop the outcome).
  static void Answer(BatchItemPtr item) {
    Outcome* o = static_cast<Item*>(item.get())->outcome_;
    item.reset();
    o->done.Notify();
  }
  int id;

 private:
  Outcome* outcome_;
};

struct FakeClock {
  int64_t now = 1'000'000;
  std::function<int64_t()> fn() {
    return [this] { return now; };
  }
};

std::vector<int> Ids(const std::vector<BatchItemPtr>& batch) {
  std::vector<int> ids;
  for (const BatchItemPtr& b : batch) ids.push_back(static_cast<Item*>(b.get())->id);
  return ids;
}

class BatcherTest : public ::testing::Test {
 protected:
  BatcherOptions Options() {
    BatcherOptions o;
    o.label = "model \"m\" version 1";
    o.batching = true;
    o.max_batch_size = 8;
    o.now_ns = clock_.fn();
    return o;
  }
  // A request with its outcome kept by the fixture (Of(id)).
  BatchItemPtr New(int id, int64_t rows = 1, std::string key = "k") {
    return std::make_unique<Item>(id, &outcomes_[id], rows, std::move(key));
  }
  Outcome& Of(int id) { return outcomes_[id]; }
  FakeClock clock_;
  std::map<int, Outcome> outcomes_;
};

TEST_F(BatcherTest, WithoutBatchingEveryRequestRunsAlone) {
  BatcherOptions o = Options();
  o.batching = false;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1), c = New(2);
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1));
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(2));
  EXPECT_TRUE(b.TakeBatch().empty());
}

TEST_F(BatcherTest, WaitsTheMaxQueueDelayForAFullerBatch) {
  BatcherOptions o = Options();
  o.max_queue_delay_ns = 100 * kUs;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1), c = New(2, 2);
  ASSERT_TRUE(b.Enqueue(a).ok());
  const int64_t first = clock_.now;
  clock_.now += 30 * kUs;
  ASSERT_TRUE(b.Enqueue(c).ok());
  int64_t wake = 0;
  EXPECT_TRUE(b.TakeBatch(&wake).empty());
  EXPECT_EQ(wake, first + 100 * kUs);  // measured from the oldest request
  clock_.now = first + 100 * kUs - 1;
  EXPECT_TRUE(b.TakeBatch().empty());
  clock_.now = first + 100 * kUs;
  EXPECT_THAT(Ids(b.TakeBatch(&wake)), ElementsAre(1, 2));
  EXPECT_EQ(b.queued(), 0);
}

TEST_F(BatcherTest, ZeroDelayTakesWhatIsQueued) {
  DynamicBatcher b(Options());
  BatchItemPtr a = New(1), c = New(2);
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1, 2));
}

TEST_F(BatcherTest, AFullBatchGoesWithoutWaiting) {
  BatcherOptions o = Options();
  o.max_queue_delay_ns = 1'000'000 * kUs;
  o.max_batch_size = 4;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1, 3), c = New(2, 2), d = New(3, 1);
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  EXPECT_TRUE(b.TakeBatch().empty());  // 3 rows; 2 more would not fit
  ASSERT_TRUE(b.Enqueue(d).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1, 3));  // 4 rows: full; c waits
  EXPECT_EQ(b.queued(), 1);
  b.Stop();  // no workers: c is rejected
  EXPECT_EQ(Of(2).rejected.code(), absl::StatusCode::kUnavailable);
}

TEST_F(BatcherTest, PreferredSizesCutTheBatch) {
  BatcherOptions o = Options();
  o.max_queue_delay_ns = 1'000'000 * kUs;
  o.preferred_batch_sizes = {2, 4};
  DynamicBatcher b(o);
  std::vector<BatchItemPtr> items;
  for (int i = 0; i < 3; ++i) {
    items.push_back(New(i));
    ASSERT_TRUE(b.Enqueue(items.back()).ok());
  }
  EXPECT_TRUE(b.TakeBatch().empty());  // 3 rows: below the largest preferred size
  items.push_back(New(3));
  ASSERT_TRUE(b.Enqueue(items.back()).ok());
  items.push_back(New(4));
  ASSERT_TRUE(b.Enqueue(items.back()).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(0, 1, 2, 3));  // 5 rows: cut at 4
  EXPECT_TRUE(b.TakeBatch().empty());
  // When the delay runs out, what is left goes (no prefix of it is a preferred size).
  clock_.now += 1'000'000 * kUs;
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(4));
}

TEST_F(BatcherTest, OnlyRequestsWithTheSameKeyShareABatch) {
  DynamicBatcher b(Options());
  BatchItemPtr a = New(1, 1, "x:[64]"), c = New(2, 1, "x:[32]"), d = New(3, 1, "x:[64]");
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  ASSERT_TRUE(b.Enqueue(d).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1, 3));
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(2));
}

TEST_F(BatcherTest, AFullQueueRefusesTheRequest) {
  BatcherOptions o = Options();
  o.max_queue_size = 2;
  o.max_queue_delay_ns = 1000 * kUs;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1), c = New(2), d = New(3);
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  absl::Status s = b.Enqueue(d);
  EXPECT_EQ(a, nullptr);  // queued: the batcher took them
  ASSERT_NE(d, nullptr);  // refused: still the caller's
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("model \"m\" version 1"));
  EXPECT_THAT(s.message(), HasSubstr("queue limit is 2"));
  clock_.now += 1000 * kUs;
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1, 2));
  EXPECT_TRUE(b.Enqueue(d).ok());  // room again
  b.Stop();
}

TEST_F(BatcherTest, ARequestPastItsTimeoutNeverRuns) {
  BatcherOptions o = Options();
  o.batching = false;
  o.default_timeout_ns = 50 * kUs;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1), c = New(2);
  c->timeout_ns = 500 * kUs;  // the request's own `timeout` overrides the default
  ASSERT_TRUE(b.Enqueue(a).ok());
  ASSERT_TRUE(b.Enqueue(c).ok());
  clock_.now += 50 * kUs;
  int64_t wake = 0;
  EXPECT_THAT(Ids(b.TakeBatch(&wake)), ElementsAre(2));
  ASSERT_TRUE(Of(1).done.HasBeenNotified());
  EXPECT_TRUE(Of(1).destroyed_before_answer);
  EXPECT_EQ(Of(1).rejected.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Of(1).rejected.message(), HasSubstr("timed out in the queue"));
  EXPECT_FALSE(Of(2).done.HasBeenNotified());
}

TEST_F(BatcherTest, ClientDeadlineAlsoExpiresAQueuedRequest) {
  BatcherOptions o = Options();
  o.max_queue_delay_ns = 1000 * kUs;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1);
  const int64_t deadline = clock_.now + 10 * kUs;
  a->deadline_ns = deadline;
  ASSERT_TRUE(b.Enqueue(a).ok());
  int64_t wake = 0;
  EXPECT_TRUE(b.TakeBatch(&wake).empty());
  EXPECT_EQ(wake, deadline);  // woken for the expiry, before the batching delay
  clock_.now = wake;
  EXPECT_TRUE(b.TakeBatch().empty());
  EXPECT_EQ(Of(1).rejected.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(BatcherTest, HigherPriorityGoesFirst) {
  BatcherOptions o = Options();
  o.batching = false;
  o.priority_levels = 3;
  o.default_priority = 2;
  DynamicBatcher b(o);
  BatchItemPtr low = New(1), def = New(2), high = New(3);
  low->priority = 3;
  high->priority = 1;
  ASSERT_TRUE(b.Enqueue(low).ok());
  ASSERT_TRUE(b.Enqueue(def).ok());  // 0: the default level 2
  ASSERT_TRUE(b.Enqueue(high).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(3));
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(2));
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(1));
  BatchItemPtr bad = New(4);
  bad->priority = 4;
  absl::Status s = b.Enqueue(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("priority 4 is out of range"));
}

TEST_F(BatcherTest, ABatchTakesHigherPriorityRequestsFirst) {
  BatcherOptions o = Options();
  o.max_batch_size = 2;
  o.priority_levels = 2;
  o.default_priority = 2;
  DynamicBatcher b(o);
  BatchItemPtr a = New(1), c = New(2), d = New(3);
  d->priority = 1;
  ASSERT_TRUE(b.Enqueue(a).ok());  // the default level, 2
  ASSERT_TRUE(b.Enqueue(c).ok());
  ASSERT_TRUE(b.Enqueue(d).ok());
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(3, 1));
  EXPECT_THAT(Ids(b.TakeBatch()), ElementsAre(2));
}

TEST_F(BatcherTest, StopWithoutWorkersAnswersTheQueue) {
  DynamicBatcher b(Options());
  BatchItemPtr a = New(1);
  ASSERT_TRUE(b.Enqueue(a).ok());
  b.Stop();
  EXPECT_EQ(Of(1).rejected.code(), absl::StatusCode::kUnavailable);
  BatchItemPtr c = New(2);
  EXPECT_EQ(b.Enqueue(c).code(), absl::StatusCode::kUnavailable);
}

TEST(BucketForTest, SmallestBucketThatHoldsTheRows) {
  const std::vector<int64_t> buckets = {1, 2, 4, 8};
  EXPECT_EQ(BucketFor(buckets, 1), 1);
  EXPECT_EQ(BucketFor(buckets, 3), 4);
  EXPECT_EQ(BucketFor(buckets, 8), 8);
  EXPECT_EQ(BucketFor(buckets, 9), 0);
  EXPECT_EQ(BucketFor({}, 1), 0);
}

// Unloading drains: requests still waiting for a fuller batch run (they are not dropped) when
// the batcher stops.
TEST(BatcherThreadsTest, StopRunsWhatIsQueued) {
  BatcherOptions o;
  o.label = "m";
  o.batching = true;
  o.max_batch_size = 8;
  o.max_queue_delay_ns = int64_t{3600} * 1'000'000'000;  // an hour: only Stop sends them
  DynamicBatcher b(o);
  std::atomic<int> ran{0};
  b.Start(2, [&](int worker, std::vector<BatchItemPtr>& batch) {
    b.WorkerDone(worker);
    for (BatchItemPtr& item : batch) {
      ran.fetch_add(1);
      Item::Answer(std::move(item));
    }
  });
  Outcome outcomes[3];
  for (int i = 0; i < 3; ++i) {
    BatchItemPtr item = std::make_unique<Item>(i, &outcomes[i]);
    // The last is not ready (the delay is an hour): it stays queued.
    ASSERT_TRUE((i < 2 ? b.Enqueue(item) : b.EnqueueAndRun(item)).ok());
  }
  EXPECT_EQ(b.queued(), 3);
  b.Stop();
  EXPECT_EQ(ran.load(), 3);
  for (const Outcome& outcome : outcomes) {
    EXPECT_TRUE(outcome.done.HasBeenNotified() && outcome.rejected.ok());
    EXPECT_TRUE(outcome.destroyed);
  }
}

// Many clients, few workers, real clock: every request is answered exactly once, by a batch
// that holds only requests of its key and never more than max_batch_size rows.
TEST(BatcherThreadsTest, ConcurrentClientsAreAllAnswered) {
  BatcherOptions o;
  o.label = "m";
  o.batching = true;
  o.max_batch_size = 4;
  o.max_queue_delay_ns = 200 * kUs;
  o.priority_levels = 2;
  DynamicBatcher b(o);
  std::mutex mu;
  std::vector<int> answered(64, 0);
  std::atomic<int> bad_batches{0};
  std::atomic<int> on_stream[3] = {0, 0, 0};
  b.Start(3, [&](int worker, std::vector<BatchItemPtr>& batch) {
    // Never two batches on one stream at once.
    if (on_stream[worker].fetch_add(1) != 0) bad_batches.fetch_add(1);
    int64_t rows = 0;
    for (const BatchItemPtr& item : batch) {
      rows += item->rows;
      if (item->batch_key != batch[0]->batch_key) bad_batches.fetch_add(1);
    }
    if (rows > 4 || worker < 0 || worker > 2) bad_batches.fetch_add(1);
    on_stream[worker].fetch_sub(1);
    b.WorkerDone(worker);
    for (BatchItemPtr& item : batch) {
      Item* it = static_cast<Item*>(item.get());
      {
        std::lock_guard<std::mutex> lock(mu);
        answered[static_cast<size_t>(it->id)] += 1;
      }
      Item::Answer(std::move(item));
    }
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&b, c] {
      for (int i = 0; i < 8; ++i) {
        Outcome outcome;
        BatchItemPtr item =
            std::make_unique<Item>(c * 8 + i, &outcome, 1 + (i % 2), (c % 2) == 0 ? "even" : "odd");
        item->priority = static_cast<uint64_t>(1 + (i % 2));
        // Half the clients run ready batches on their own thread.
        ASSERT_TRUE((c < 4 ? b.Enqueue(item) : b.EnqueueAndRun(item)).ok());
        outcome.done.WaitForNotification();
        ASSERT_TRUE(outcome.rejected.ok());
      }
    });
  }
  for (std::thread& t : clients) t.join();
  b.Stop();
  EXPECT_EQ(bad_batches.load(), 0);
  for (int n : answered) EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace reprise::server
