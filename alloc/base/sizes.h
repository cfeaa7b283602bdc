// Sizes that more than one place must agree on, so that each is written once.
#ifndef CUDAFS_ALLOC_BASE_SIZES_H_
#define CUDAFS_ALLOC_BASE_SIZES_H_

#include <cstdint>

namespace cudafs {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_SIZES_H_
