// Whether a file's pages are there, for code that writes into memory other
// processes own (a private copy's memfd): writing into a page that is not
// allocates it, charged to the writer's memory cgroup, not the file's
// owner's.
#ifndef CUDAFS_ALLOC_BASE_FILE_PAGES_H_
#define CUDAFS_ALLOC_BASE_FILE_PAGES_H_

#include <cstdint>

#include "absl/status/status.h"

namespace cudafs {

// OK when every page of [offset, offset + length) of the shmem file `fd`
// is there, EINVAL naming the first one that is not. Asks mincore(2) of a
// read-only view, which touches no page. Both mincore and SEEK_HOLE count
// only pages that were written: one fallocate(2) reserved but nobody
// wrote counts as missing, and so does one swapped out (swapping it in
// would be charged to its owner, but nothing tells it from a hole).
absl::Status CheckPagesAllocated(int fd, uint64_t offset, uint64_t length);

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_BASE_FILE_PAGES_H_
