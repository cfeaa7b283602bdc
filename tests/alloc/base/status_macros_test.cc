#include "alloc/base/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

absl::StatusOr<std::unique_ptr<int>> MakeInt(int value) {
  if (value < 0) return absl::InvalidArgumentError("negative");
  return std::make_unique<int>(value);
}

// Declares a move-only value from a StatusOr, twice in one function.
absl::StatusOr<int> Sum(int a, int b) {
  CUDAFS_ASSIGN_OR_RETURN(std::unique_ptr<int> first, MakeInt(a));
  CUDAFS_ASSIGN_OR_RETURN(const std::unique_ptr<int> second, MakeInt(b));
  return *first + *second;
}

TEST(AssignOrReturnTest, DeclaresTheValue) {
  absl::StatusOr<int> sum = Sum(2, 3);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, 5);
}

TEST(AssignOrReturnTest, ReturnsTheFirstError) {
  EXPECT_EQ(Sum(-1, 3).status(), absl::InvalidArgumentError("negative"));
  EXPECT_EQ(Sum(2, -1).status(), absl::InvalidArgumentError("negative"));
}

TEST(AssignOrReturnTest, AssignsToAnExistingVariable) {
  int calls = 0;
  auto twice = [&](int value) -> absl::Status {
    std::unique_ptr<int> held;
    CUDAFS_ASSIGN_OR_RETURN(held, (++calls, MakeInt(value)));
    EXPECT_EQ(*held, value);
    return absl::OkStatus();
  };
  EXPECT_TRUE(twice(7).ok());
  EXPECT_EQ(twice(-7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 2);  // the expression runs once per use
}

absl::Status Check(int value, int* reached) {
  CUDAFS_RETURN_IF_ERROR(MakeInt(value).status());
  ++*reached;
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, ReturnsOnlyErrors) {
  int reached = 0;
  EXPECT_TRUE(Check(1, &reached).ok());
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(Check(-1, &reached), absl::InvalidArgumentError("negative"));
  EXPECT_EQ(reached, 1);
}

absl::StatusOr<std::string> Describe(int value) {
  CUDAFS_RETURN_IF_ERROR(MakeInt(value).status());  // into a StatusOr
  return std::to_string(value);
}

TEST(ReturnIfErrorTest, WorksInFunctionsReturningStatusOr) {
  EXPECT_EQ(*Describe(4), "4");
  EXPECT_EQ(Describe(-4).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cudafs
