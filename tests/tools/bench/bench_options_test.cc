#include "tools/bench/reprise_bench/bench_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::tools::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseSweepTest, SingleRangeAndStep) {
  EXPECT_THAT(*ParseSweep("4", "concurrency"), ElementsAre(4));
  EXPECT_THAT(*ParseSweep("1:4", "concurrency"), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(*ParseSweep("1:16:5", "concurrency"), ElementsAre(1, 6, 11, 16));
  EXPECT_THAT(*ParseSweep("100:250:100", "request-rate"), ElementsAre(100, 200));
  EXPECT_THAT(*ParseSweep("1,2,4,16", "concurrency"), ElementsAre(1, 2, 4, 16));
  EXPECT_FALSE(ParseSweep("1,,4", "concurrency").ok());
}

TEST(ParseSweepTest, RejectsBadSweeps) {
  EXPECT_THAT(std::string(ParseSweep("4:1", "concurrency").status().message()),
              HasSubstr("end is below the start"));
  EXPECT_FALSE(ParseSweep("0", "concurrency").ok());
  EXPECT_FALSE(ParseSweep("1:2:3:4", "concurrency").ok());
  EXPECT_FALSE(ParseSweep("a:b", "concurrency").ok());
  EXPECT_THAT(std::string(ParseSweep("1:5000", "concurrency").status().message()),
              HasSubstr("more than 1000"));
}

// An operator measures a deployed server: every address is taken as given (none is dialled).
TEST(ParseBenchArgsTest, TakesAnyAddress) {
  for (const char* addr : {"127.0.0.1:8001", "10.0.0.1:8001", "reprise.prod.svc:8001",
                           "[2001:db8::1]:8001", "unix:/tmp/s", "dns:///reprise:8001"}) {
    absl::StatusOr<BenchOptions> o = ParseBenchArgs({"--model", "m", "--addr", addr});
    ASSERT_TRUE(o.ok()) << addr << ": " << o.status();
    EXPECT_EQ(o->addr, addr);
  }
}

TEST(ParseBenchArgsTest, FullCommandLine) {
  absl::StatusOr<BenchOptions> o = ParseBenchArgs({"--model",
                                                   "mlp",
                                                   "--addr=127.0.0.1:9000",
                                                   "--input",
                                                   "input=x.npy",
                                                   "--shape",
                                                   "input=8x64",
                                                   "-b",
                                                   "8",
                                                   "--concurrency",
                                                   "1:8:2",
                                                   "--measurement-request-count",
                                                   "50",
                                                   "--stability-percentage",
                                                   "5",
                                                   "--max-windows",
                                                   "4",
                                                   "--csv",
                                                   "a.csv",
                                                   "--json",
                                                   "a.json",
                                                   "--no-progress"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->model, "mlp");
  EXPECT_EQ(o->addr, "127.0.0.1:9000");
  ASSERT_EQ(o->inputs.size(), 1u);
  EXPECT_EQ(o->inputs[0].second, "x.npy");
  ASSERT_EQ(o->shapes.size(), 1u);
  EXPECT_THAT(o->shapes[0].second, ElementsAre(8, 64));
  EXPECT_EQ(o->batch_size, 8);
  EXPECT_EQ(o->load_mode, LoadMode::kConcurrency);
  EXPECT_THAT(o->levels, ElementsAre(1, 3, 5, 7));
  EXPECT_EQ(o->window_mode, WindowMode::kCount);
  EXPECT_EQ(o->window_requests, 50);
  EXPECT_DOUBLE_EQ(o->stability, 0.05);
  EXPECT_EQ(o->max_windows, 4);
  EXPECT_EQ(o->csv_path, "a.csv");
  EXPECT_EQ(o->json_path, "a.json");
  EXPECT_FALSE(o->progress);
}

TEST(ParseBenchArgsTest, RejectsBadInput) {
  EXPECT_THAT(std::string(ParseBenchArgs({"--concurrency", "2"}).status().message()),
              HasSubstr("--model is required"));
  EXPECT_THAT(std::string(ParseBenchArgs({"--model", "m", "--addr", ""}).status().message()),
              HasSubstr("--addr is empty"));
  EXPECT_THAT(
      std::string(ParseBenchArgs({"--model", "m", "--concurrency", "1", "--request-rate", "10"})
                      .status()
                      .message()),
      HasSubstr("exclude each other"));
  EXPECT_THAT(
      std::string(ParseBenchArgs({"--model", "m", "--concurrency", "1.5"}).status().message()),
      HasSubstr("integers"));
  EXPECT_THAT(
      std::string(ParseBenchArgs({"--model", "m", "--max-windows", "2"}).status().message()),
      HasSubstr("--max-windows wants an integer >= 3"));
  EXPECT_THAT(std::string(ParseBenchArgs({"--model", "m", "--bogus", "1"}).status().message()),
              HasSubstr("unknown flag --bogus"));
  EXPECT_THAT(std::string(ParseBenchArgs({"--model"}).status().message()),
              HasSubstr("needs a value"));
  EXPECT_TRUE(ParseBenchArgs({"--help"})->help);
}

}  // namespace
}  // namespace reprise::tools::bench
