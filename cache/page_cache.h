// PageCache: a host-side write-back cache of 4 KiB file pages in a fixed
// pool of frames (Device::AllocateHostBuffer: pinned on a GPU), shared by
// every file of a mount under one byte budget (cache=). A frame is free, a
// clean page (evictable, least recently used first per shard) or a dirty
// page (only its file's Flush makes it clean). When no frame can be had a
// write goes straight to the arena, so nothing needs the cache to be
// correct. A file (CachedFile, the only user) names its pages by its
// inode number. Why, and how it is sharded: docs/DESIGN.md, *Write-back
// cache*.
//
// Thread-safe. A shard's `mu` guards its frames, their contents, its page
// maps and counters; it is taken inside a file's inode lock, never two at
// once, never across a device call. Methods taking an inode number need the
// caller to hold that file's lock, exclusively unless said otherwise, which
// keeps the file's pages still between two calls (dirty pages are never
// evicted).
#ifndef CUDAFS_CACHE_PAGE_CACHE_H_
#define CUDAFS_CACHE_PAGE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
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
  // batch is gathered under the shards' locks, which requests need.
  static constexpr uint64_t kMaxFlushPages = 4096;
  // A read fill: the pages of one small request plus read-ahead.
  static constexpr uint64_t kFillBytes = 256 << 10;
  static_assert(kSmallRequest + kReadAhead + 2 * kPageSize <= kFillBytes);
  // Pages of a file that go to one shard together (a chunk): a sequential
  // small write fills contiguous frames of one shard, which a flush copies
  // as one piece.
  static constexpr uint64_t kChunkPages = 16;
  // At most this many shards, each of at least kMinShardFrames frames: a
  // small cache (tests use a dozen pages) is one shard, with one LRU order.
  static constexpr uint32_t kMaxShards = 16;
  static constexpr uint32_t kMinShardFrames = 64;
  // A random read that misses a shard with no free frame is cached one time
  // in this many (see AdmitsFill).
  static constexpr uint64_t kAdmitOneIn = 8;

  using Frame = uint32_t;
  static constexpr Frame kNoFrame = ~Frame{0};

  // A cache of `budget_bytes` (rounded down to whole pages, and to a
  // multiple of the shard count) over `device`'s host buffers; 0 disables it.
  PageCache(Device* device, uint64_t budget_bytes);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  bool enabled() const { return frame_count_ > 0; }
  PageCacheStats Stats() const;

  // Inode numbers of the files with a page dirty for at least `age`.
  std::vector<uint64_t> DirtyFiles(absl::Duration age) const;

  // For the flusher: returns once more than half the budget is dirty, or
  // after `timeout`. True when it returned for pressure.
  bool WaitForPressure(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(pressure_mu_);
  // Ends a WaitForPressure early (the flusher is stopping).
  void Wake() ABSL_LOCKS_EXCLUDED(pressure_mu_);

  // Drops the pages of file `ino` unflushed: the file is gone.
  void RemoveFile(uint64_t ino);

  // Reads: the file's lock may be shared for these four.
  //
  // Copies the cached pages of [offset, offset + length) to `out`; returns,
  // for each page of the range from offset / kPageSize on, whether it was
  // missing.
  std::vector<bool> ReadCached(uint64_t ino, uint64_t offset, size_t length, char* out);
  // Whether a random read that missed page `index` should cache what it
  // fetches: yes while the page's shard has a free frame, else one time in
  // kAdmitOneIn. A working set larger than the cache would otherwise pay an
  // eviction (and a copy through a staging buffer) on every read and gain
  // nothing; admitting some keeps a working set that fits taking the cache
  // over from one that came before.
  bool AdmitsFill(uint64_t ino, uint64_t index);
  // Caches `count` pages from page `first` on as clean pages, where the file
  // has none yet and frames can be had; `content` holds their bytes, which
  // must be the arena's.
  void InsertClean(uint64_t ino, uint64_t first, uint64_t count, const char* content);
  // Copies the dirty pages within [offset, offset + length) over `out`.
  void OverlayDirty(uint64_t ino, uint64_t offset, size_t length, char* out);

  // The frames of a small write, one per page: the cached page (pinned, so
  // it stays) or a new frame that is not yet in the file's map and so cannot
  // be evicted, and that no one else reaches.
  struct WriteFrames {
    uint64_t ino = 0;
    uint64_t first = 0;  // page index of frames[0]
    std::vector<Frame> frames;
    std::vector<bool> is_new;
  };
  // Frames for `count` pages from `first` on; false (and nothing held) when
  // the cache has no frames to spare. Writes are not declined as random
  // reads are: a dirty page reaches the arena in a batch with others, which
  // costs the GPU far less than a copy per write, so even a working set 64
  // times the cache writes faster through it (docs/MEASUREMENTS.md).
  bool ReserveForWrite(uint64_t ino, uint64_t first, uint64_t count, WriteFrames* write);
  // Gives the frames of a write that will not happen back.
  void CancelWrite(const WriteFrames& write);
  // Copies `data`, the write's bytes at `offset`, into its frames and makes
  // them the file's dirty pages.
  void CommitWrite(const WriteFrames& write, uint64_t offset, const char* data, size_t length);

  // Dirty pages to write to the arena in one device call.
  struct FlushBatch {
    std::vector<Frame> frames;
    std::vector<ExtentMap::Run> runs;  // straight from the frames
  };
  // The file's first dirty pages, as many as one batch takes; empty when it
  // has none. The frames stay as they are while the caller holds the file's
  // lock, so it may write the runs without the cache's locks.
  FlushBatch CollectDirty(uint64_t ino);
  // The batch reached the arena: its pages are clean.
  void MarkFlushed(const FlushBatch& batch);

  // Whether the file has pages overlapping [offset, end).
  bool HasPagesIn(uint64_t ino, uint64_t offset, uint64_t end);
  // Drops the file's pages overlapping [offset, end), dirty or not.
  void DropPages(uint64_t ino, uint64_t offset, uint64_t end);
  // Drops the pages wholly inside [offset, end) and zeroes the cached bytes
  // of the others that it covers.
  void DiscardRange(uint64_t ino, uint64_t offset, uint64_t end);

  // Counters for what the file decided, charged to the shard of page `index`.
  void CountMiss(uint64_t ino, uint64_t index);
  void CountWriteThroughs(uint64_t ino, uint64_t index, uint64_t pages);

  // Pinned buffers of kFillBytes for read fills; null when none can be had.
  char* AcquireStaging() { return staging_.Acquire(); }
  void ReleaseStaging(char* buffer) { staging_.Release(buffer); }

  char* FrameData(Frame frame) const { return frames_.data() + uint64_t{frame} * kPageSize; }

 private:
  using PageMap = absl::btree_map<uint64_t, Frame>;  // page index -> frame

  struct FilePages {
    PageMap pages;
    uint64_t dirty_pages = 0;
    absl::Time first_dirtied;
  };

  static constexpr uint64_t kNoOwner = 0;  // no inode has number 0

  struct Page {
    uint64_t owner = kNoOwner;  // inode number; kNoOwner: the frame is free
    uint64_t index = 0;         // page number in the file
    // Neighbours in the shard's LRU list, while clean and owned.
    Frame lru_prev = kNoFrame;
    Frame lru_next = kNoFrame;
    int32_t pins = 0;  // > 0: a write is using the frame
    bool dirty = false;
    bool in_lru = false;
  };

  // One lock's share of the frames: [first, first + frames) of the pool.
  struct Shard {
    absl::Mutex mu;
    Frame first = 0;
    std::atomic<uint64_t>* total_dirty = nullptr;  // the cache's count
    std::vector<Page> pages ABSL_GUARDED_BY(mu);   // indexed by frame - first
    std::vector<Frame> free ABSL_GUARDED_BY(mu);
    Frame lru_oldest ABSL_GUARDED_BY(mu) = kNoFrame;  // clean pages, a list
    Frame lru_newest ABSL_GUARDED_BY(mu) = kNoFrame;
    // Only the files that have pages here: an empty file costs nothing.
    absl::flat_hash_map<uint64_t, FilePages> files ABSL_GUARDED_BY(mu);
    absl::flat_hash_set<uint64_t> dirty_files ABSL_GUARDED_BY(mu);
    uint64_t dirty_pages ABSL_GUARDED_BY(mu) = 0;
    uint64_t declined_fills ABSL_GUARDED_BY(mu) = 0;  // for AdmitsFill
    uint64_t hits ABSL_GUARDED_BY(mu) = 0;
    uint64_t misses ABSL_GUARDED_BY(mu) = 0;
    uint64_t write_throughs ABSL_GUARDED_BY(mu) = 0;

    Page& PageOf(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pages[frame - first]; }
    // A free frame for page `index` of `ino`, evicting the least recently
    // used clean page if needed; kNoFrame when every frame is dirty or
    // pinned. The new page is clean and not yet in its file's map or the
    // LRU list. May erase any file's entry of `files`.
    Frame Take(uint64_t ino, uint64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Gives `frame` back (its page leaves its owner's map in the caller).
    void Free(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Frees the page at `it` of `file`; returns the next one. The caller
    // erases the file's entry once its map is empty.
    PageMap::iterator Drop(FilePages& file, PageMap::iterator it)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Erases the entry of file `ino` if it has no page left here.
    void EraseIfEmpty(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    void LruAppend(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    void LruRemove(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Moves a clean page to the most recently used end.
    void Touch(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    void MarkDirty(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    void MarkClean(Frame frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Clears a dirty page's flag and its share of the dirty counts; the
    // caller decides whether the page joins the LRU list.
    void ForgetDirty(Page& page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  };

  // The shard of page `index` of file `ino`.
  Shard& ShardOf(uint64_t ino, uint64_t index) const;
  Shard& ShardOfFrame(Frame frame) const { return shards_[frame / frames_per_shard_]; }
  // Calls fn(shard, first, end) for each 64 KiB chunk of pages [first, end)
  // of file `ino`, with the chunk's share of the range, until fn returns
  // false.
  template <typename Fn>
  void ForEachChunk(uint64_t ino, uint64_t first, uint64_t end, Fn fn) const;
  // As ForEachChunk, but where the range has more chunks than there are
  // shards, calls fn once per shard with the whole range (a shard's map of
  // the file holds only its own pages): for walks over a file's page map.
  template <typename Fn>
  void ForEachShardOf(uint64_t ino, uint64_t first, uint64_t end, Fn fn) const;
  // DropPages (zero_partial false) and DiscardRange (true).
  void DiscardPages(uint64_t ino, uint64_t offset, uint64_t end, bool zero_partial);
  // Wakes the flusher if more than half the frames are dirty and it waits.
  void SignalPressure() ABSL_LOCKS_EXCLUDED(pressure_mu_);

  // Set once in the constructor; 0 frames when the budget is 0 or its
  // memory could not be had.
  uint32_t frame_count_ = 0;
  uint32_t shard_count_ = 1;  // a power of two
  uint32_t frames_per_shard_ = 0;
  PinnedBuffer frames_;
  std::unique_ptr<Shard[]> shards_;
  // Pages per flush batch: what one device call takes (on a GPU one launch
  // of the scatter kernel), within kMaxFlushPages.
  const uint64_t flush_pages_;

  std::atomic<uint64_t> dirty_pages_{0};
  std::atomic<uint64_t> flush_batches_{0};
  std::atomic<uint64_t> flushed_bytes_{0};
  std::atomic<uint64_t> flush_copies_{0};
  absl::Mutex pressure_mu_;
  absl::CondVar pressure_;
  // Set while the flusher waits, so that writers signal only then.
  std::atomic<bool> flusher_waiting_{false};

  PinnedBufferPool staging_;
};

}  // namespace cudafs

#endif  // CUDAFS_CACHE_PAGE_CACHE_H_
