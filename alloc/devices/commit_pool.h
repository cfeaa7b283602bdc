// CommitPool: commits a range of a device on several threads at once, each
// over a disjoint slice of it. Faulting fresh host memory in is paid per
// page by the thread that touches it (zeroing, page tables), so one thread
// commits at a fraction of a GPU link's speed while several on disjoint
// slices add up (docs/DESIGN.md, "Giving memory back"). A fixed pool,
// started on first use, rather than a thread per call: concurrent callers
// share the same few cores, which bounds what commits take from the
// daemon's request threads.
//
// Thread-safe.
#ifndef CUDAFS_ALLOC_DEVICES_COMMIT_POOL_H_
#define CUDAFS_ALLOC_DEVICES_COMMIT_POOL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device.h"

namespace cudafs {

class CommitPool {
 public:
  // Half the cores, at most 8, and a caller adds itself: commits are
  // pinned ahead of the copies (SpillDevice), so they need to keep up
  // with the link, not to take every core, while the other half of the
  // cores serve requests and run the move threads meanwhile.
  static size_t DefaultThreads();

  // `threads` >= 1 commit at once; the caller of Commit is one of them.
  explicit CommitPool(size_t threads);
  // Waits for the threads, which are idle: every Commit has returned.
  ~CommitPool();

  CommitPool(const CommitPool&) = delete;
  CommitPool& operator=(const CommitPool&) = delete;

  // Commits [offset, offset + length) of `device` in at most `threads`
  // disjoint slices of whole `align` units (offset and length are
  // multiples of it), each slice by one Device::Commit. On failure the
  // slices committed are decommitted: nothing of the range stays
  // committed, and the first error comes back.
  absl::Status Commit(Device* device, uint64_t offset, uint64_t length, uint64_t align);

 private:
  // One Commit call's slices: taken by the pool's threads and the caller.
  struct Job {
    Device* device = nullptr;
    std::vector<DeviceRange> slices;
    std::vector<absl::Status> results;
    size_t next = 0;      // first slice not taken
    size_t finished = 0;  // slices done
  };

  // Takes the next slice of `job` and commits it. REQUIRES: a slice left
  // (mu_ held, released while committing).
  void RunSlice(Job* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A pool thread's loop: slices of the oldest job, until stopping.
  void Work();

  const size_t threads_;
  absl::Mutex mu_;
  // Jobs with slices not yet taken, oldest first.
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_COMMIT_POOL_H_
