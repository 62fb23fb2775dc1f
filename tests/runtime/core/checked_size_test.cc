#include "runtime/core/checked_size.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace reprise::runtime {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedSize, MulAndAddRefuseOverflowAndNegatives) {
  int64_t r = -1;
  EXPECT_TRUE(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, &r));
  EXPECT_EQ(r, int64_t{1} << 62);
  EXPECT_FALSE(CheckedMul(int64_t{1} << 32, int64_t{1} << 31, &r));
  EXPECT_FALSE(CheckedMul(-1, 4, &r));
  EXPECT_TRUE(CheckedAdd(kMax - 1, 1, &r));
  EXPECT_EQ(r, kMax);
  EXPECT_FALSE(CheckedAdd(kMax, 1, &r));
  size_t s = 0;
  EXPECT_FALSE(CheckedMulSize(std::numeric_limits<size_t>::max() / 2 + 1, 2, &s));
  EXPECT_FALSE(CheckedAddSize(std::numeric_limits<size_t>::max(), 1, &s));
}

TEST(CheckedSize, ElementCountChecksEveryDimensionEvenAfterAZero) {
  EXPECT_EQ(CheckedElementCount({2, 3, 4}), 24);
  EXPECT_EQ(CheckedElementCount({}), 1);
  EXPECT_EQ(CheckedElementCount({0, 5}), 0);
  // The reproduction of the hostile-input issue: a zero dimension used to end the check.
  EXPECT_EQ(CheckedElementCount({0, int64_t{1} << 39}, int64_t{1} << 32), std::nullopt);
  EXPECT_EQ(CheckedElementCount({0, int64_t{1} << 61, 16}), std::nullopt);
  EXPECT_EQ(CheckedElementCount({-1, 2}), std::nullopt);
  EXPECT_EQ(CheckedElementCount({int64_t{1} << 32, int64_t{1} << 32}), std::nullopt);
  EXPECT_EQ(CheckedElementCount({1024, 1024}, 1 << 20), 1 << 20);
  EXPECT_EQ(CheckedElementCount({1024, 1025}, 1 << 20), std::nullopt);
}

TEST(CheckedSize, ByteSizeRefusesAWrappingProduct) {
  // 2^61 int64 elements wrap to 0 bytes in plain 64-bit arithmetic.
  EXPECT_EQ(CheckedByteSize(int64_t{1} << 61, 8), std::nullopt);
  EXPECT_EQ(CheckedByteSize(10, 4), 40);
  EXPECT_EQ(CheckedByteSize(10, 4, 39), std::nullopt);
  absl::StatusOr<int64_t> bytes = DenseByteSize({int64_t{1} << 62, 4}, 4, "initializer \"w\"");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bytes.status().message().find("initializer \"w\""), std::string::npos);
  EXPECT_EQ(*DenseByteSize({2, 3}, 8, "x"), 48);
}

}  // namespace
}  // namespace reprise::runtime
