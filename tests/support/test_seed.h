// TestSeed: the seed of a randomized test, from the CUDAFS_TEST_SEED
// environment variable when it is set, so that a failure (whose seed the test
// prints, through SeedTrace) can be replayed; otherwise random, or the
// test's own fixed seed.
#ifndef CUDAFS_TESTS_SUPPORT_TEST_SEED_H_
#define CUDAFS_TESTS_SUPPORT_TEST_SEED_H_

#include <errno.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace cudafs {

// CUDAFS_TEST_SEED, else `fallback`.
inline uint64_t TestSeed(uint64_t fallback) {
  const char* seed = std::getenv("CUDAFS_TEST_SEED");
  return seed != nullptr ? std::strtoull(seed, nullptr, 10) : fallback;
}

// CUDAFS_TEST_SEED, else a random seed.
inline uint64_t TestSeed() {
  const char* seed = std::getenv("CUDAFS_TEST_SEED");
  return seed != nullptr ? std::strtoull(seed, nullptr, 10) : std::random_device()();
}

// For a SCOPED_TRACE, what replays the failure: "CUDAFS_TEST_SEED=<seed>;
// rerun: CUDAFS_TEST_SEED=<seed> [also] <this binary> --gtest_filter=<this
// test>". `also` names other settings the run depends on ("NAME=value").
inline std::string SeedTrace(uint64_t seed, const std::string& also = "") {
  const std::string setting = "CUDAFS_TEST_SEED=" + std::to_string(seed);
  std::string trace = setting + "; rerun: " + setting + (also.empty() ? "" : " " + also);
  trace += std::string(" ") + program_invocation_name;
  if (const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info()) {
    trace += std::string(" --gtest_filter=") + test->test_suite_name() + "." + test->name();
  }
  return trace;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_TEST_SEED_H_
