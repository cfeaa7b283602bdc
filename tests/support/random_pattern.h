// Pattern: bytes that differ from one seed to the next, so that data landing
// in the wrong place, or not at all, shows.
#ifndef CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_
#define CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cudafs {

inline std::vector<char> Pattern(size_t length, uint32_t seed) {
  std::vector<char> bytes(length);
  std::mt19937 rng(seed);
  for (char& byte : bytes) byte = static_cast<char>(rng());
  return bytes;
}

// `size` bytes from `rng`, a word at a time (a file's worth quickly).
inline std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string bytes(size, '\0');
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, 8);
  }
  for (; i < size; ++i) bytes[i] = static_cast<char>(rng());
  return bytes;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_RANDOM_PATTERN_H_
