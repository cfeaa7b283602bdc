// TestSeed: the seed of a randomized test, from the CUDAFS_TEST_SEED
// environment variable when it is set, so that a failure (whose seed the test
// prints, through SeedTrace) can be replayed; otherwise random, or the
// test's own fixed seed.
#ifndef CUDAFS_TESTS_SUPPORT_TEST_SEED_H_
#define CUDAFS_TESTS_SUPPORT_TEST_SEED_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

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

// "CUDAFS_TEST_SEED=<seed>", for a SCOPED_TRACE: what replays the failure.
inline std::string SeedTrace(uint64_t seed) { return "CUDAFS_TEST_SEED=" + std::to_string(seed); }

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_TEST_SEED_H_
