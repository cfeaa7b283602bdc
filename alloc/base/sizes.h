// Sizes that more than one place must agree on, so that each is written once.
#ifndef CUDAFS_ALLOC_BASE_SIZES_H_
#define CUDAFS_ALLOC_BASE_SIZES_H_

#include <cstdint>

namespace cudafs {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// The largest read or write the kernel sends (the max_write and
// max_readahead asked for at FUSE init), and so the least a buffer for one
// request's data holds.
inline constexpr uint64_t kMaxRequestBytes = kMiB;

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_SIZES_H_
