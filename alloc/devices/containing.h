// Containing: a lookup in a map of ranges by their start, shared by
// PhysicalPieces and the CUDA device's table of pinned host ranges.
#ifndef CUDAFS_ALLOC_DEVICES_CONTAINING_H_
#define CUDAFS_ALLOC_DEVICES_CONTAINING_H_

#include <cstdint>

namespace cudafs {

// The entry of `ranges` (start -> a value whose length `length_of` gives)
// whose range holds `at`, or ranges.end().
template <typename Map, typename LengthOf>
auto Containing(Map& ranges, uint64_t at, LengthOf length_of) {
  auto it = ranges.upper_bound(at);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return at < it->first + length_of(it->second) ? it : ranges.end();
}

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CONTAINING_H_
