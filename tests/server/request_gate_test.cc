#include "server/request_gate.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/executor.h"
#include "server/notification.h"

namespace reprise::server {
namespace {

TEST(RequestGateTest, AdmitsUpToTheLimitThenRefuses) {
  RequestGate gate(2);
  ASSERT_TRUE(gate.Enter().ok());
  ASSERT_TRUE(gate.Enter().ok());
  absl::Status full = gate.Enter();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(gate.in_flight(), 2);
  gate.Exit();
  EXPECT_TRUE(gate.Enter().ok());
  gate.Close();
  EXPECT_EQ(gate.Enter().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(gate.closed());
  EXPECT_FALSE(gate.WaitIdle(absl::InfinitePast()));  // two still in flight
  gate.Exit();
  gate.Exit();
  EXPECT_TRUE(gate.WaitIdle(absl::InfinitePast()));
}

TEST(RequestGateTest, WaitIdleReturnsWhenTheLastRequestLeaves) {
  RequestGate gate(8);
  ASSERT_TRUE(gate.Enter().ok());
  Notification entered;
  std::thread worker([&] {
    entered.WaitForNotification();
    gate.Exit();
  });
  gate.Close();
  entered.Notify();
  EXPECT_TRUE(gate.WaitIdle(absl::InfiniteFuture()));
  worker.join();
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(ThreadPoolTest, StopRunsEveryQueuedTask) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2, "test");
    for (int i = 0; i < 100; ++i) pool.Schedule([&ran] { ran.fetch_add(1); });
    pool.Stop();
    EXPECT_EQ(ran.load(), 100);
    pool.Schedule([&ran] { ran.fetch_add(1); });  // after Stop: runs inline
    EXPECT_EQ(ran.load(), 101);
  }
}

TEST(NotificationTest, DeadlineInThePast) {
  Notification n;
  EXPECT_FALSE(n.WaitForNotificationWithDeadline(absl::Now() - absl::Seconds(1)));
  n.Notify();
  EXPECT_TRUE(n.HasBeenNotified());
  EXPECT_TRUE(n.WaitForNotificationWithDeadline(absl::InfinitePast()));
}

}  // namespace
}  // namespace reprise::server
