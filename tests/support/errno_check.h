// Checks of system calls that say what went wrong by errno name: Errno, an
// outcome gtest prints as "EACCES", and ASSERT_SYS_OK / EXPECT_ERRNO, which
// explain a failure as "open(...) failed: ENOENT".
#ifndef CUDAFS_TESTS_SUPPORT_ERRNO_CHECK_H_
#define CUDAFS_TESTS_SUPPORT_ERRNO_CHECK_H_

#include <initializer_list>
#include <ostream>
#include <string>

#include "gtest/gtest.h"

namespace cudafs_test {

// "ENOENT", or "errno N" for a value without a name.
std::string ErrnoName(int err);

// The outcome of a call as an errno value (0: success) that gtest prints by
// name, so `EXPECT_EQ(result, Errno{EACCES})` reads "EPERM vs EACCES".
struct Errno {
  // Child processes that did not report a result (crashed, timed out).
  static constexpr int kNoResult = -1;
  int value = 0;
  friend bool operator==(Errno, Errno) = default;
  friend void PrintTo(Errno e, std::ostream* os);
};

// errno of the call that returned `result` when it failed (-1), else
// success. Reads errno before anything else can change it.
Errno ResultErrno(long long result);

// Success unless `result` is -1; then names `call` and errno.
testing::AssertionResult SysOk(long long result, const char* call);

// Success when `result` is -1 with errno one of `expected`.
testing::AssertionResult SysFails(long long result, const char* call,
                                  std::initializer_list<int> expected);

}  // namespace cudafs_test

// A system call that returns -1 on failure must succeed.
#define ASSERT_SYS_OK(call) ASSERT_TRUE(::cudafs_test::SysOk((call), #call))
#define EXPECT_SYS_OK(call) EXPECT_TRUE(::cudafs_test::SysOk((call), #call))
// A system call must fail with one of the listed errno values.
#define EXPECT_ERRNO(call, ...) EXPECT_TRUE(::cudafs_test::SysFails((call), #call, {__VA_ARGS__}))
#define ASSERT_ERRNO(call, ...) ASSERT_TRUE(::cudafs_test::SysFails((call), #call, {__VA_ARGS__}))

#endif  // CUDAFS_TESTS_SUPPORT_ERRNO_CHECK_H_
