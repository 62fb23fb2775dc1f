// StreamPool: leases, the bounded FIFO queue, and exclusive use of each stream under
// concurrency (also run under TSan).
#include "server/stream_pool.h"

#include <array>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

using ::testing::HasSubstr;

// Spins (yielding) until `done` holds; the condition is what the test waits for, not a time.
template <typename F>
void WaitUntil(F done) {
  while (!done()) std::this_thread::yield();
}

TEST(StreamPoolTest, LeasesDistinctStreamsAndReturnsThemOnDestruction) {
  StreamPool pool("model \"m\" version 1", 2, 4);
  EXPECT_EQ(pool.size(), 2);
  absl::StatusOr<StreamLease> a = pool.Acquire();
  absl::StatusOr<StreamLease> b = pool.Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->stream(), 0);  // a lone client always gets stream 0 first
  EXPECT_EQ(b->stream(), 1);
  EXPECT_EQ(pool.leased(), 2);
  const int first = a->stream();
  *a = StreamLease();  // move-assigning releases the old lease
  EXPECT_EQ(pool.leased(), 1);
  absl::StatusOr<StreamLease> c = pool.Acquire();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->stream(), first);
  StreamLease moved = *std::move(c);
  EXPECT_TRUE(moved);
  EXPECT_EQ(pool.leased(), 2);
  moved.Reset();
  b->Reset();
  EXPECT_EQ(pool.leased(), 0);
}

TEST(StreamPoolTest, RefusesWhenTheQueueIsFull) {
  StreamPool pool("model \"mlp\" version 1", 1, 0);
  absl::StatusOr<StreamLease> held = pool.Acquire();
  ASSERT_TRUE(held.ok());
  absl::StatusOr<StreamLease> refused = pool.Acquire();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("model \"mlp\" version 1"));
  EXPECT_THAT(refused.status().message(), HasSubstr("queue limit is 0"));
}

TEST(StreamPoolTest, WaitersGetTheStreamInArrivalOrder) {
  StreamPool pool("m", 1, 2);
  absl::StatusOr<StreamLease> held = pool.Acquire();
  ASSERT_TRUE(held.ok());
  std::mutex mu;
  std::vector<int> order;
  auto waiter = [&](int id) {
    absl::StatusOr<StreamLease> lease = pool.Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(id);
  };
  std::thread first(waiter, 1);
  WaitUntil([&] { return pool.waiting() == 1; });
  std::thread second(waiter, 2);
  WaitUntil([&] { return pool.waiting() == 2; });
  // Two wait, the limit is two: a third is refused.
  EXPECT_EQ(pool.Acquire().status().code(), absl::StatusCode::kResourceExhausted);
  held->Reset();
  first.join();
  second.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(pool.waiting(), 0);
  EXPECT_EQ(pool.leased(), 0);
}

TEST(StreamPoolTest, ConcurrentRequestsNeverShareAStream) {
  constexpr int kStreams = 3;
  constexpr int kThreads = 8;
  constexpr int kRounds = 300;
  StreamPool pool("m", kStreams, kThreads);
  std::array<std::atomic<bool>, kStreams> busy{};
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<StreamLease> lease = pool.Acquire();
        if (!lease.ok()) {
          errors.fetch_add(1);
          continue;
        }
        if (busy[static_cast<size_t>(lease->stream())].exchange(true)) errors.fetch_add(1);
        const int now = inside.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        inside.fetch_sub(1);
        busy[static_cast<size_t>(lease->stream())].store(false);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(most.load(), kStreams);
  EXPECT_EQ(pool.leased(), 0);
}

}  // namespace
}  // namespace reprise::server
