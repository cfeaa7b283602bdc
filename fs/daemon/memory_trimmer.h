// MemoryTrimmer: hands memory that malloc holds free back to the system.
//
// glibc gives each thread that allocates under contention an arena of its
// own, and memory freed in an arena stays there. The daemon's workers
// allocate an inode, a name and a map node per file, so after a burst of
// creates and an rm -rf most of that memory sits free, scattered over the
// arenas, and the next burst lands partly elsewhere: daemon RSS crept up
// with every cycle of many files created and removed, without bound.
// Two things fix that. Large blocks (the inode table's and a big
// directory's hash arrays, megabytes each) get their own mappings, so that
// freeing one gives it back: glibc would otherwise raise its mmap threshold
// after the first such free and keep the next ones in an arena, where
// nothing trims the top of a thread's heap. And malloc_trim(0) returns the
// free pages inside every arena. Once a second the
// trimmer looks at how much is free (mallinfo2) and trims when that grew by
// more than kSlackBytes since it last looked low: trimmed chunks still
// count as free, so "much is free" alone would trim an idle daemon again
// and again.
#ifndef CUDAFS_FS_DAEMON_MEMORY_TRIMMER_H_
#define CUDAFS_FS_DAEMON_MEMORY_TRIMMER_H_

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "fs/daemon/periodic_task.h"

namespace cudafs {

class MemoryTrimmer {
 public:
  // Free bytes malloc may keep before a trim.
  static constexpr uint64_t kSlackBytes = 8 * kMiB;

  // Blocks this large or larger are mapped on their own.
  static constexpr int kMmapThreshold = static_cast<int>(kMiB);

  // Sets malloc's mmap threshold (for the whole process) and starts a
  // thread that calls TrimIfWorthIt every `interval`.
  explicit MemoryTrimmer(absl::Duration interval = absl::Seconds(1));

  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Trims when malloc holds more than kSlackBytes free beyond what it held
  // after the last trim (or less since); true if it did. Not thread-safe:
  // the trimmer's own thread calls it, or a test that starts none.
  bool TrimIfWorthIt();

  // For tests: no thread.
  struct NoThread {};
  explicit MemoryTrimmer(NoThread) {}

 private:
  // Free bytes malloc held after the last trim, or the least seen since.
  uint64_t baseline_ = 0;
  // Last, so stopped first, while baseline_ lives.
  std::unique_ptr<PeriodicTask> thread_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MEMORY_TRIMMER_H_
