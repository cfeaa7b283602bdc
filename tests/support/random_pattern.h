// Pattern: bytes that differ from one seed to the next, so that data landing
// in the wrong place, or not at all, shows.
#ifndef CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_
#define CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace cudafs {

inline std::vector<char> Pattern(size_t length, uint32_t seed) {
  std::vector<char> bytes(length);
  std::mt19937 rng(seed);
  for (char& byte : bytes) byte = static_cast<char>(rng());
  return bytes;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_
