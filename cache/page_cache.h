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
// The cache owns the frames and every file's page map; a file (CachedFile,
// its only user) names its pages by the FileId it was given and decides
// what goes through the cache and when the arena is written.
//
// Locking: `mu_` guards the frames, their contents, every file's page map
// and the counters. It is taken inside a file's inode lock (never the other
// way round) and never held across a device call. The methods taking a
// FileId need the caller to hold that file's lock, exclusively unless said
// otherwise: the lock keeps the file's pages from changing under a caller
// between two calls (dirty pages are never evicted).
#ifndef CUDAFS_CACHE_PAGE_CACHE_H_
#define CUDAFS_CACHE_PAGE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "alloc/devices/device.h"
#include "alloc/devices/pinned_buffer.h"
#include "alloc/devices/pinned_buffer_pool.h"
#include "alloc/storage/extent_map.h"

namespace cudafs {

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
  // Largest flush batch, in pages, whatever the device takes in one call: a
  // batch is gathered under `mu_`, which every file's requests need.
  static constexpr uint64_t kMaxFlushPages = 4096;
  // A read fill: the pages of one small request plus read-ahead.
  static constexpr uint64_t kFillBytes = 256 << 10;
  static_assert(kSmallRequest + kReadAhead + 2 * kPageSize <= kFillBytes);

  using Frame = uint32_t;
  static constexpr Frame kNoFrame = ~Frame{0};
  // One file's pages.
  enum class FileId : uint32_t {};

  // A cache of `budget_bytes` (rounded down to pages) over `device`'s
  // host buffers; 0 disables it.
  PageCache(Device* device, uint64_t budget_bytes);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  bool enabled() const { return frame_count_ > 0; }
  PageCacheStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // Inode numbers of the files with a page dirty for at least `age`.
  std::vector<uint64_t> DirtyFiles(absl::Duration age) const ABSL_LOCKS_EXCLUDED(mu_);

  // For the flusher: returns once more than half the budget is dirty, or
  // after `timeout`. True when it returned for pressure.
  bool WaitForPressure(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a WaitForPressure early (the flusher is stopping).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);

  // A file of inode `ino`, with no pages; a FileId that names nothing when
  // the cache is disabled (no other method may be given it then).
  FileId AddFile(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the file's pages unflushed: the file is gone.
  void RemoveFile(FileId file) ABSL_LOCKS_EXCLUDED(mu_);

  // Reads: the file's lock may be shared for these three.
  //
  // Copies the cached pages of [offset, offset + length) to `out`; returns,
  // for each page of the range from offset / kPageSize on, whether it was
  // missing.
  std::vector<bool> ReadCached(FileId file, uint64_t offset, size_t length, char* out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Caches `count` pages from page `first` on as clean pages, where the file
  // has none yet and frames can be had; `content` holds their bytes, which
  // must be the arena's.
  void InsertClean(FileId file, uint64_t first, uint64_t count, const char* content)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Copies the dirty pages within [offset, offset + length) over `out`.
  void OverlayDirty(FileId file, uint64_t offset, size_t length, char* out)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The frames of a small write, one per page: the cached page (pinned, so
  // it stays) or a new frame that is not yet in the file's map and so cannot
  // be evicted, and that no one else reaches: the writer fills it without
  // the lock.
  struct WriteFrames {
    FileId file{};
    uint64_t first = 0;  // page index of frames[0]
    std::vector<Frame> frames;
    std::vector<bool> is_new;
  };
  // Frames for `count` pages from `first` on; false (and nothing held) when
  // the cache has no frames to spare.
  bool ReserveForWrite(FileId file, uint64_t first, uint64_t count, WriteFrames* write)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives the frames of a write that will not happen back.
  void CancelWrite(const WriteFrames& write) ABSL_LOCKS_EXCLUDED(mu_);
  // Copies `data`, the write's bytes at `offset`, into its frames and makes
  // them the file's dirty pages.
  void CommitWrite(const WriteFrames& write, uint64_t offset, const char* data, size_t length)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Dirty pages to write to the arena in one device call.
  struct FlushBatch {
    std::vector<Frame> frames;
    std::vector<ExtentMap::Run> runs;  // straight from the frames
  };
  // The file's first dirty pages, as many as one batch takes; empty when it
  // has none. The frames stay as they are while the caller holds the file's
  // lock, so it may write the runs without `mu_`.
  FlushBatch CollectDirty(FileId file) ABSL_LOCKS_EXCLUDED(mu_);
  // The batch reached the arena: its pages are clean.
  void MarkFlushed(const FlushBatch& batch) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the file has pages overlapping [offset, end).
  bool HasPagesIn(FileId file, uint64_t offset, uint64_t end) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the file's pages overlapping [offset, end), dirty or not.
  void DropPages(FileId file, uint64_t offset, uint64_t end) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the pages wholly inside [offset, end) and zeroes the cached bytes
  // of the others that it covers.
  void DiscardRange(FileId file, uint64_t offset, uint64_t end) ABSL_LOCKS_EXCLUDED(mu_);

  // Counters for what the file decided.
  void CountMiss() ABSL_LOCKS_EXCLUDED(mu_);
  void CountWriteThroughs(uint64_t pages) ABSL_LOCKS_EXCLUDED(mu_);

  // Pinned buffers of kFillBytes for read fills; null when none can be had.
  char* AcquireStaging() { return staging_.Acquire(); }
  void ReleaseStaging(char* buffer) { staging_.Release(buffer); }

  char* FrameData(Frame frame) const { return frames_.data() + uint64_t{frame} * kPageSize; }

 private:
  using PageMap = absl::btree_map<uint64_t, Frame>;  // page index -> frame

  struct FilePages {
    uint64_t ino = 0;
    PageMap pages;
    uint64_t dirty_pages = 0;
    absl::Time first_dirtied;
  };

  struct Page {
    uint32_t owner = kNoFile;  // index in files_; kNoFile: the frame is free
    uint64_t index = 0;        // page number in the file
    bool dirty = false;
    int pins = 0;  // > 0: a write is using the frame outside the lock
    std::list<Frame>::iterator lru;  // valid while clean and owned
  };
  static constexpr uint32_t kNoFile = ~uint32_t{0};

  FilePages& Pages(FileId file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return files_[static_cast<uint32_t>(file)];
  }
  // A free frame for page `index` of `owner`, evicting the least recently
  // used clean page if needed; kNoFrame when every frame is dirty or pinned.
  // The new page is clean and not yet in the LRU list.
  Frame Take(FileId owner, uint64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `frame` back (its page leaves its owner's map in the caller).
  void Free(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the page at `it` of `file`; returns the next one.
  PageMap::iterator Drop(FilePages& file, PageMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes a page from Take evictable, as a clean page.
  void AddClean(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDirty(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkClean(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears a dirty page's flag and its share of the dirty counts; the
  // caller decides whether the page joins the LRU list.
  void ForgetDirty(Page& page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a clean page to the most recently used end.
  void Touch(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set once in the constructor; 0 frames when the budget is 0 or its
  // memory could not be had.
  uint32_t frame_count_ = 0;
  PinnedBuffer frames_;
  // Pages per flush batch: what one device call takes (on a GPU one launch
  // of the scatter kernel), within kMaxFlushPages.
  const uint64_t flush_pages_;

  mutable absl::Mutex mu_;
  absl::CondVar pressure_;
  std::vector<Page> pages_ ABSL_GUARDED_BY(mu_);  // indexed by frame
  std::vector<Frame> free_ ABSL_GUARDED_BY(mu_);
  std::list<Frame> lru_ ABSL_GUARDED_BY(mu_);  // clean pages, least recent first
  std::vector<FilePages> files_ ABSL_GUARDED_BY(mu_);  // indexed by FileId
  std::vector<uint32_t> free_files_ ABSL_GUARDED_BY(mu_);  // removed files' slots
  uint64_t dirty_pages_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint32_t> dirty_files_ ABSL_GUARDED_BY(mu_);
  PageCacheStats stats_ ABSL_GUARDED_BY(mu_);

  PinnedBufferPool staging_;
};

}  // namespace cudafs

#endif  // CUDAFS_CACHE_PAGE_CACHE_H_
