#include "tests/support/errno_check.h"

#include <string.h>

#include <cerrno>

namespace cudafs_test {

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "errno " + std::to_string(err);
}

void PrintTo(Errno e, std::ostream* os) {
  if (e.value == 0) {
    *os << "success";
  } else if (e.value == Errno::kNoResult) {
    *os << "no result (child process died)";
  } else {
    *os << ErrnoName(e.value);
  }
}

Errno ResultErrno(long long result) { return Errno{result == -1 ? errno : 0}; }

testing::AssertionResult SysOk(long long result, const char* call) {
  const int err = errno;
  if (result != -1) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << call << " failed: " << ErrnoName(err) << " (" << strerror(err) << ")";
}

testing::AssertionResult SysFails(long long result, const char* call,
                                  std::initializer_list<int> expected) {
  const int err = errno;
  std::string wanted;
  for (int e : expected) wanted += (wanted.empty() ? "" : " or ") + ErrnoName(e);
  if (result != -1) {
    return testing::AssertionFailure()
           << call << " succeeded (returned " << result << "), expected " << wanted;
  }
  for (int e : expected) {
    if (err == e) return testing::AssertionSuccess();
  }
  return testing::AssertionFailure()
         << call << " failed with " << ErrnoName(err) << ", expected " << wanted;
}

}  // namespace cudafs_test
