#include "tools/bench/reprise_bench/window_stats.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::tools::bench {
namespace {

using ::testing::ElementsAre;

Window MakeWindow(int n, double latency_us, double seconds) {
  Window w;
  w.seconds = seconds;
  for (int i = 0; i < n; ++i) {
    RequestSample s;
    s.latency_us = latency_us;
    s.send_us = 1;
    s.recv_us = 2;
    s.ok = true;
    w.samples.push_back(s);
  }
  return w;
}

TEST(PercentileTest, NearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.50), 50);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile({7}, 0.9), 7);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(LastThreeStableTest, NeedsThreeAgreeingWindows) {
  std::vector<Window> w = {MakeWindow(100, 1000, 1), MakeWindow(104, 1000, 1)};
  EXPECT_FALSE(LastThreeStable(w, 0.10));  // two windows only
  w.push_back(MakeWindow(97, 1050, 1));
  EXPECT_TRUE(LastThreeStable(w, 0.10));
  EXPECT_FALSE(LastThreeStable(w, 0.01));
  w.push_back(MakeWindow(150, 1000, 1));  // throughput jumps
  EXPECT_FALSE(LastThreeStable(w, 0.10));
  std::vector<Window> slow = {MakeWindow(100, 1000, 1), MakeWindow(100, 1000, 1),
                              MakeWindow(100, 2000, 1)};  // latency jumps
  EXPECT_FALSE(LastThreeStable(slow, 0.10));
  std::vector<Window> empty = {MakeWindow(0, 0, 1), MakeWindow(0, 0, 1), MakeWindow(0, 0, 1)};
  EXPECT_FALSE(LastThreeStable(empty, 0.10));
}

TEST(SummarizeTest, KeepsTheLastThreeWindows) {
  std::vector<Window> w = {MakeWindow(10, 5000, 1), MakeWindow(20, 100, 0.5),
                           MakeWindow(20, 200, 0.5), MakeWindow(20, 300, 0.5)};
  w[3].samples[0].ok = false;  // a failed request is counted but not timed
  const LevelSummary s = Summarize(4, w, /*batch=*/8);
  EXPECT_EQ(s.level, 4);
  EXPECT_EQ(s.windows, 4);
  EXPECT_THAT(s.window_counts, ElementsAre(10, 20, 20, 20));
  EXPECT_EQ(s.measured_requests, 60);
  EXPECT_EQ(s.measured_ok, 59);
  EXPECT_DOUBLE_EQ(s.seconds, 1.5);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 59 / 1.5);
  EXPECT_DOUBLE_EQ(s.inferences_per_s, 8 * 59 / 1.5);
  EXPECT_EQ(s.p50_us, 200);
  EXPECT_EQ(s.max_us, 300);  // the first window's 5000 us is not kept
  EXPECT_DOUBLE_EQ(s.send_us, 1);
  EXPECT_DOUBLE_EQ(s.recv_us, 2);
  EXPECT_FALSE(s.server_valid);
}

TEST(SummarizeTest, ServerSplitFromCounterDeltas) {
  std::vector<Window> w = {MakeWindow(10, 100, 1), MakeWindow(10, 100, 1)};
  w[0].server_before.valid = true;
  w[0].server_before.queue_count = 5;
  w[0].server_before.queue_ns = 1000;
  w[0].server_before.infer_count = 5;
  w[0].server_before.infer_ns = 50000;
  w[0].server_before.inference_count = 40;
  w[1].server_after = w[0].server_before;
  w[1].server_after.queue_count = 25;
  w[1].server_after.queue_ns = 1000 + 20 * 3000;  // 3 us each
  w[1].server_after.infer_count = 25;
  w[1].server_after.infer_ns = 50000 + 20 * 80000;  // 80 us each
  w[1].server_after.inference_count = 200;
  const LevelSummary s = Summarize(1, w, 8);
  ASSERT_TRUE(s.server_valid);
  EXPECT_DOUBLE_EQ(s.server_queue_us, 3);
  EXPECT_DOUBLE_EQ(s.server_infer_us, 80);
  EXPECT_DOUBLE_EQ(s.server_input_us, 0);  // no compute_input counts: 0, not a division by 0
  EXPECT_EQ(s.server_inferences, 160u);
}

}  // namespace
}  // namespace reprise::tools::bench
