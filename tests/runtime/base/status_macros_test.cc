#include "runtime/base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace reprise::runtime {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("asked to fail") : absl::OkStatus();
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status TwoSteps(bool first_fails, bool second_fails, int* steps) {
  RETURN_IF_ERROR(FailIf(first_fails));
  ++*steps;
  RETURN_IF_ERROR(FailIf(second_fails));
  ++*steps;
  return absl::OkStatus();
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::StatusOr<std::unique_ptr<std::string>> MakeOwned(bool ok) {
  if (!ok) return absl::NotFoundError("none");
  return std::make_unique<std::string>("owned");
}

absl::StatusOr<size_t> OwnedLength(bool ok) {
  std::unique_ptr<std::string> value;
  ASSIGN_OR_RETURN(value, MakeOwned(ok));  // assignment to an existing move-only variable
  return value->size();
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  int steps = 0;
  EXPECT_TRUE(TwoSteps(false, false, &steps).ok());
  EXPECT_EQ(steps, 2);
  steps = 0;
  absl::Status status = TwoSteps(false, true, &steps);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(steps, 1);
  steps = 0;
  EXPECT_FALSE(TwoSteps(true, false, &steps).ok());
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesValueAndError) {
  EXPECT_EQ(*Quarter(12), 3);
  absl::StatusOr<int> odd = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(), "odd");
  EXPECT_FALSE(Quarter(5).ok());
}

TEST(StatusMacrosTest, AssignOrReturnMovesIntoExistingVariable) {
  EXPECT_EQ(*OwnedLength(true), 5u);
  EXPECT_EQ(OwnedLength(false).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace reprise::runtime
