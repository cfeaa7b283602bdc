// PageCache: a host-side write-back cache of file pages in pinned memory,
// shared by every file of a mount under one byte budget (cache=).
//
// Why: every trip to a GPU costs ~7 µs however small, and scattered 4 KiB
// copies cost far more than one large copy. Small writes land here and are
// acknowledged at memory speed; dirty pages reach the arena later in
// batches, one device call each (see CachedFile::Flush). Small reads are
// served from here and fill whole pages from the arena.
//
// Pages are 4 KiB: the kernel sends small requests in 4 KiB pages, a small
// file then costs one page, and a flush merges runs of contiguous pages into
// one copy anyway, so larger pages would only add read-before-write for
// partial pages and waste budget on small files.
//
// The cache holds a fixed pool of frames from Device::AllocateHostBuffer
// (pinned on a GPU, which then reads dirty pages straight from them). A
// frame is either free, a clean page (in LRU order, evictable by anyone) or
// a dirty page (only its file's Flush makes it clean). When no frame can be had a write goes
// straight to the arena, so the cache is never needed for correctness.
//
// Locking: `mu_` guards the frames, their contents, every file's page map
// and the counters. It is taken inside a file's inode lock (never the other
// way round) and never held across a device call.
#ifndef CUDAFS_CACHE_PAGE_CACHE_H_
#define CUDAFS_CACHE_PAGE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "alloc/devices/device.h"
#include "alloc/devices/pinned_buffer.h"
#include "alloc/devices/pinned_buffer_pool.h"

namespace cudafs {

class CachedFile;

struct PageCacheStats {
  uint64_t budget_bytes = 0;
  uint64_t cached_bytes = 0;  // clean and dirty
  uint64_t dirty_bytes = 0;
  uint64_t hits = 0;    // pages a read or write found in the cache
  uint64_t misses = 0;  // pages a read or partial write had to fetch from the arena
  uint64_t write_throughs = 0;  // pages written straight to the arena for want of a frame
  uint64_t flush_batches = 0;   // device batches that flushed dirty pages
  uint64_t flushed_bytes = 0;
  uint64_t flush_copies = 0;  // copies in those batches (each a run of contiguous pages)

  // "name value" lines, for --stats.
  std::string ToText() const;
};

class PageCache {
 public:
  static constexpr uint64_t kPageSize = 4096;
  // Reads and writes shorter than this go through the cache; longer ones go
  // to the arena (which they use well) and only reconcile with cached pages.
  static constexpr uint64_t kSmallRequest = 128 << 10;
  // How far a sequential small read fills ahead of itself.
  static constexpr uint64_t kReadAhead = 64 << 10;
  // Largest flush batch, in pages: one device call (on a GPU one launch of
  // the scatter kernel, which takes up to 4096 pieces).
  static constexpr uint64_t kFlushPages = 4096;
  // A read fill: the pages of one small request plus read-ahead.
  static constexpr uint64_t kFillBytes = 256 << 10;
  static_assert(kSmallRequest + kReadAhead + 2 * kPageSize <= kFillBytes);

  // A cache of `budget_bytes` (rounded down to pages) over `device`'s
  // host buffers; 0 disables it.
  PageCache(Device* device, uint64_t budget_bytes);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  bool enabled() const { return frame_count_ > 0; }
  PageCacheStats Stats() const;

  // Inode numbers of the files with a page dirty for at least `age`.
  std::vector<uint64_t> DirtyFiles(absl::Duration age) const;

  // For the flusher: returns once more than half the budget is dirty, or
  // after `timeout`. True when it returned for pressure.
  bool WaitForPressure(absl::Duration timeout);
  // Ends a WaitForPressure early (the flusher is stopping).
  void Wake();

 private:
  friend class CachedFile;
  using Frame = uint32_t;
  static constexpr Frame kNoFrame = ~Frame{0};

  struct Page {
    CachedFile* owner = nullptr;  // null: the frame is free
    uint64_t index = 0;           // page number in the file
    bool dirty = false;
    int pins = 0;  // > 0: a write is using the frame outside the lock
    std::list<Frame>::iterator lru;  // valid while clean and owned
  };

  char* FrameData(Frame frame) const { return frames_.data() + uint64_t{frame} * kPageSize; }
  // A free frame for page `index` of `owner`, evicting the least recently
  // used clean page if needed; kNoFrame when every frame is dirty or pinned.
  // The new page is clean and not yet in the LRU list.
  Frame Take(CachedFile* owner, uint64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `frame` back (its page leaves its owner's map in the caller).
  void Free(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a page from Take evictable, as a clean page.
  void AddClean(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDirty(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkClean(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears a dirty page's flag and its share of the dirty counts; the
  // caller decides whether the page joins the LRU list.
  void ForgetDirty(Page& page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a clean page to the most recently used end.
  void Touch(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Pinned buffers of kFillBytes for read fills.
  char* AcquireStaging() { return staging_.Acquire(); }
  void ReleaseStaging(char* buffer) { staging_.Release(buffer); }

  // Set once in the constructor; 0 frames when the budget is 0 or its
  // memory could not be had.
  uint32_t frame_count_ = 0;
  PinnedBuffer frames_;

  mutable absl::Mutex mu_;
  absl::CondVar pressure_;
  std::vector<Page> pages_ ABSL_GUARDED_BY(mu_);  // indexed by frame
  std::vector<Frame> free_ ABSL_GUARDED_BY(mu_);
  std::list<Frame> lru_ ABSL_GUARDED_BY(mu_);  // clean pages, least recent first
  uint64_t dirty_pages_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<CachedFile*> dirty_files_ ABSL_GUARDED_BY(mu_);
  PageCacheStats stats_ ABSL_GUARDED_BY(mu_);

  PinnedBufferPool staging_;
};

}  // namespace cudafs

#endif  // CUDAFS_CACHE_PAGE_CACHE_H_
