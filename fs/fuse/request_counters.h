// Counts the FUSE requests that reach cudafs's handlers, by type, and the
// time their handlers took, for the stats: how many round trips a workload
// costs, per file and per kind, and how much of each the daemon's own work
// is (the rest is the kernel's and the transport's).
#ifndef CUDAFS_FS_FUSE_REQUEST_COUNTERS_H_
#define CUDAFS_FS_FUSE_REQUEST_COUNTERS_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cudafs {

// The requests counted, one per handler of FuseOperations, named as in the
// stats (requests_<name>). The one list: the enum, the names and the text
// all come from it.
#define CUDAFS_FUSE_REQUESTS(X) \
  X(init)                       \
  X(lookup)                     \
  X(forget)                     \
  X(batch_forget)               \
  X(getattr)                    \
  X(setattr)                    \
  X(readlink)                   \
  X(mknod)                      \
  X(mkdir)                      \
  X(symlink)                    \
  X(link)                       \
  X(unlink)                     \
  X(rmdir)                      \
  X(rename)                     \
  X(open)                       \
  X(create)                     \
  X(read)                       \
  X(write)                      \
  X(fsync)                      \
  X(release)                    \
  X(opendir)                    \
  X(readdir)                    \
  X(readdirplus)                \
  X(releasedir)                 \
  X(statfs)                     \
  X(setxattr)                   \
  X(getxattr)                   \
  X(listxattr)                  \
  X(removexattr)                \
  X(fallocate)                  \
  X(copy_file_range)            \
  X(lseek)

enum class FuseRequest : size_t {
#define CUDAFS_REQUEST_ENUMERATOR(name) name,
  CUDAFS_FUSE_REQUESTS(CUDAFS_REQUEST_ENUMERATOR)
#undef CUDAFS_REQUEST_ENUMERATOR
};

class RequestCounters {
 public:
  RequestCounters();

  // Called once per request, at the entry of its handler, by whichever
  // thread serves it (our /dev/fuse workers or libfuse's io_uring threads).
  void Count(FuseRequest request) { Add(static_cast<size_t>(request), 1); }
  // ... and as the handler returns, with the nanoseconds it took.
  void CountHandlerTime(FuseRequest request, uint64_t nanoseconds) {
    Add(kHandlerNs + static_cast<size_t>(request), nanoseconds);
  }
  // Inodes released by one FORGET (1) or BATCH_FORGET (its count).
  void CountForgotten(uint64_t inodes) { Add(kForgottenInodes, inodes); }

  // "requests_<name> N" for every request type, zeros included (a
  // consumer diffing two readings finds every key in both), then
  // "forgotten_inodes N", then "handler_ns_<name> N" for every type: the
  // nanoseconds its handlers took, in all (wall time on a monotonic clock,
  // waits for locks and devices included; a handler that replies before
  // it returns is counted to its return).
  std::string ToText() const;

 private:
  static constexpr size_t kRequestTypes = 0
#define CUDAFS_REQUEST_ONE(name) +1
      CUDAFS_FUSE_REQUESTS(CUDAFS_REQUEST_ONE)
#undef CUDAFS_REQUEST_ONE
      ;
  static constexpr size_t kForgottenInodes = kRequestTypes;
  static constexpr size_t kHandlerNs = kRequestTypes + 1;  // one per type
  static constexpr size_t kCounters = 2 * kRequestTypes + 1;

  // One shard per CPU, each on cache lines of its own: the thread on a CPU
  // bumps only that CPU's shard, so up to 16 workers plus one io_uring
  // thread per CPU never bounce a line between cores. 128 bytes, not 64:
  // Intel's adjacent-line prefetcher pulls lines in pairs. Atomic because a
  // thread can be moved to another CPU between choosing a shard and adding.
  struct alignas(128) Shard {
    std::atomic<uint64_t> counts[kCounters] = {};
  };

  // Inline: it runs on every request, and the library is not built with LTO.
  void Add(size_t counter, uint64_t amount) {
    // sched_getcpu reads the CPU from glibc's rseq area (no system call);
    // its -1 on failure becomes a valid shard through the unsigned modulo.
    const size_t shard = static_cast<unsigned>(sched_getcpu()) % shard_count_;
    shards_[shard].counts[counter].fetch_add(amount, std::memory_order_relaxed);
  }
  uint64_t Sum(size_t counter) const;

  const size_t shard_count_;
  const std::unique_ptr<Shard[]> shards_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_REQUEST_COUNTERS_H_
