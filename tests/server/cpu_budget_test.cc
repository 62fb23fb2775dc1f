// The CPU budget behind the thread defaults: cpu.max parsing, the cgroup walk over a fake
// cgroup tree, and (run under `taskset -c 0` by ctest) the affinity mask.
#include "server/cpu_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace reprise::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(ParseCpuMaxTest, QuotaAndNoLimit) {
  EXPECT_THAT(*ParseCpuMax("200000 100000\n"), Optional(2.0));
  EXPECT_THAT(*ParseCpuMax("150000 100000"), Optional(1.5));
  EXPECT_THAT(*ParseCpuMax("50000 100000"), Optional(0.5));
  EXPECT_EQ(*ParseCpuMax("max 100000\n"), std::nullopt);
}

TEST(ParseCpuMaxTest, RejectsMalformed) {
  for (const char* text :
       {"", "max", "200000", "200000 0", "-1 100000", "abc 100000", "100 200 300", "200000 x"}) {
    absl::StatusOr<std::optional<double>> q = ParseCpuMax(text);
    ASSERT_FALSE(q.ok()) << "\"" << text << "\"";
    EXPECT_THAT(std::string(q.status().message()), HasSubstr("cpu.max"));
  }
}

TEST(CpusForTest, QuotaCutsTheAffinityAndRoundsUp) {
  EXPECT_EQ(CpusFor(64, 2.0), 2);
  EXPECT_EQ(CpusFor(64, 1.5), 2);
  EXPECT_EQ(CpusFor(64, 0.25), 1);
  EXPECT_EQ(CpusFor(4, 16.0), 4);
  EXPECT_EQ(CpusFor(8, std::nullopt), 8);
  EXPECT_EQ(CpusFor(0, std::nullopt), 1);
}

class FakeCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("cgroup_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "kubepods" / "pod1" / "ctr");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

  fs::path root_;
};

TEST_F(FakeCgroupTest, SmallestQuotaAlongThePathBinds) {
  Write(root_ / "cpu.max", "max 100000\n");
  Write(root_ / "kubepods" / "cpu.max", "400000 100000\n");
  Write(root_ / "kubepods" / "pod1" / "cpu.max", "200000 100000\n");
  Write(root_ / "kubepods" / "pod1" / "ctr" / "cpu.max", "max 100000\n");
  Write(root_ / "self_cgroup", "0::/kubepods/pod1/ctr\n");
  const CpuBudget b = DetectCpuBudget(root_.string(), (root_ / "self_cgroup").string());
  ASSERT_TRUE(b.quota.has_value());
  EXPECT_DOUBLE_EQ(*b.quota, 2.0);
  EXPECT_EQ(b.quota_file, (root_ / "kubepods" / "pod1" / "cpu.max").string());
  EXPECT_EQ(b.cpus, std::min(b.affinity_cpus, 2));
  EXPECT_THAT(b.Describe(), HasSubstr("cgroup cpu.max 2.00 in "));
}

TEST_F(FakeCgroupTest, RootCgroupOfANamespacedContainer) {
  Write(root_ / "cpu.max", "100000 100000\n");
  Write(root_ / "self_cgroup", "0::/\n");
  const CpuBudget b = DetectCpuBudget(root_.string(), (root_ / "self_cgroup").string());
  EXPECT_EQ(b.cpus, 1);
}

TEST_F(FakeCgroupTest, CgroupV1OrNoCpuControllerMeansNoLimit) {
  Write(root_ / "self_cgroup", "4:memory:/x\n1:cpu:/\n");  // no "0::" line
  CpuBudget b = DetectCpuBudget(root_.string(), (root_ / "self_cgroup").string());
  EXPECT_FALSE(b.quota.has_value());
  EXPECT_EQ(b.cpus, b.affinity_cpus);
  Write(root_ / "self_cgroup", "0::/kubepods\n");  // no cpu.max anywhere
  b = DetectCpuBudget(root_.string(), (root_ / "self_cgroup").string());
  EXPECT_FALSE(b.quota.has_value());
  EXPECT_THAT(b.Describe(), HasSubstr("no limit"));
}

// ctest runs this under `taskset -c 0` with REPRISE_EXPECT_CPUS=1 (tests/CMakeLists.txt).
TEST(AffinityTest, FollowsTheAffinityMask) {
  const char* expect = std::getenv("REPRISE_EXPECT_CPUS");
  if (expect == nullptr) GTEST_SKIP() << "REPRISE_EXPECT_CPUS is not set (run under taskset)";
  int want = 0;
  ASSERT_TRUE(absl::SimpleAtoi(expect, &want)) << expect;
  const CpuBudget b = DetectCpuBudget();
  EXPECT_EQ(b.affinity_cpus, want);
  EXPECT_LE(b.cpus, want);
}

}  // namespace
}  // namespace reprise::server
