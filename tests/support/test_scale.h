// Scaled: the operation counts of long randomized tests, scaled by the
// CUDAFS_TEST_SCALE environment variable (a percentage, default 100), so
// that slow builds (ThreadSanitizer runs code 5–15× slower) can run the
// same tests with fewer operations.
#ifndef CUDAFS_TESTS_SUPPORT_TEST_SCALE_H_
#define CUDAFS_TESTS_SUPPORT_TEST_SCALE_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace cudafs {

inline int Scaled(int operations) {
  const char* scale = std::getenv("CUDAFS_TEST_SCALE");
  const int64_t percent = scale != nullptr ? std::strtoll(scale, nullptr, 10) : 100;
  return static_cast<int>(std::max<int64_t>(1, operations * std::clamp<int64_t>(percent, 1, 100) / 100));
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_TEST_SCALE_H_
