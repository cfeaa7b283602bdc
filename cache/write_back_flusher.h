// WriteBackFlusher: the write-back policy of a PageCache, on a thread of its
// own. Every dirty page reaches the arena within about two flush intervals,
// at once when more than half the budget is dirty, and at the latest when
// the flusher is destroyed (a clean unmount drops nothing acknowledged).
// It decides when and which files; `flush_file`, the files' owner's, writes
// one back under that file's lock (docs/DESIGN.md, *Write-back cache*, says
// why) and is called with no lock held.
#ifndef CUDAFS_CACHE_WRITE_BACK_FLUSHER_H_
#define CUDAFS_CACHE_WRITE_BACK_FLUSHER_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cache/page_cache.h"

namespace cudafs {

class WriteBackFlusher {
 public:
  // Writes back the dirty pages of the file of inode `ino` and returns once
  // they are in the arena (as fsync); a file that is gone has none.
  using FlushFile = std::function<absl::Status(uint64_t ino)>;

  static constexpr absl::Duration kInterval = absl::Milliseconds(200);

  // Starts flushing `cache`, which must outlive the flusher; no thread when
  // the cache is disabled. `flush_file` is called from the flusher's thread
  // until the destructor returns.
  WriteBackFlusher(PageCache* cache, FlushFile flush_file, absl::Duration interval = kInterval);
  // Stops the thread, then writes back every dirty page.
  ~WriteBackFlusher();
  WriteBackFlusher(const WriteBackFlusher&) = delete;
  WriteBackFlusher& operator=(const WriteBackFlusher&) = delete;

 private:
  void Loop();

  PageCache* const cache_;
  const FlushFile flush_file_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace cudafs

#endif  // CUDAFS_CACHE_WRITE_BACK_FLUSHER_H_
