// CachedFile: the bytes of one regular file, as an ExtentMap in the arena
// plus the file's pages in the mount's PageCache. It offers what ExtentMap
// offers, and the filesystem core uses it in its place.
//
// Invariants, for every page of the file that is in the cache:
//  - the cached page holds the file's current bytes (zeros past the end);
//  - a clean page equals the arena; a dirty page is newer than the arena;
//  - the arena range of a dirty page is mapped (MapForWriteBack at write
//    time), so a flush needs no allocation and cannot fail for space: a
//    write that could not be backed fails with ENOSPC when it is made.
//
// Not thread-safe by itself: the owning inode's lock guards it, shared for
// Read, NextData/NextHole and allocated_bytes, exclusive for the rest.
#ifndef CUDAFS_CACHE_CACHED_FILE_H_
#define CUDAFS_CACHE_CACHED_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/extent_map.h"
#include "cache/page_cache.h"

namespace cudafs {

class CachedFile {
 public:
  // What the files of a mount share: their ExtentMaps' space, and the
  // cache, which may be disabled (then every call goes straight to the
  // arena). One pointer a file: a million small files are a million
  // CachedFiles.
  struct Space : ExtentMap::Space {
    Space(PageCache* cache, Arena* arena, uint64_t max_extent)
        : ExtentMap::Space(arena, max_extent), cache(cache) {}

    PageCache* const cache;
  };

  // `space` must outlive the file.
  CachedFile(const Space* space, uint64_t ino);
  // Drops the file's pages unflushed: the file is gone.
  ~CachedFile();
  CachedFile(const CachedFile&) = delete;
  CachedFile& operator=(const CachedFile&) = delete;

  // Reads [offset, offset + length), which lies below `file_size`.
  absl::Status Read(uint64_t offset, size_t length, char* out, uint64_t file_size);
  // Writes `data` at `offset` into a file of `file_size` bytes (before the
  // write). All or nothing on ENOSPC.
  absl::Status Write(uint64_t offset, const char* data, size_t length, uint64_t file_size);
  // Writes every dirty page to the arena; returns once they are there
  // (fsync). Pages that failed stay dirty.
  absl::Status Flush();

  // Copies [source_offset, + length) of `source`, which lies below
  // `source_size`, to `offset` in this file of `file_size` bytes (before
  // the copy); holes copy as zeros. Small copies are a read and a write
  // through the cache, which needs no device when it holds the source's
  // pages; large ones run on the device (ExtentMap::CopyFrom), with cached
  // pages kept consistent.
  absl::Status CopyFrom(CachedFile& source, uint64_t source_offset, uint64_t source_size,
                        uint64_t offset, uint64_t length, uint64_t file_size);
  absl::Status Reserve(uint64_t offset, uint64_t length) {
    return extents_.Reserve(offset, length);
  }
  absl::Status PunchHole(uint64_t offset, uint64_t length);
  absl::Status Truncate(uint64_t size);
  void TrimTail(uint64_t size) { extents_.TrimTail(size); }
  std::optional<uint64_t> NextData(uint64_t offset) const { return extents_.NextData(offset); }
  uint64_t NextHole(uint64_t offset) const { return extents_.NextHole(offset); }
  // As ExtentMap's, after writing back and dropping the file's pages: from
  // then on every read and write goes to the arena, which a mapping may
  // change under any cache.
  absl::StatusOr<std::unique_ptr<ExportedMemory>> Export(uint64_t size);
  // As ExtentMap's, after writing the file's dirty pages back; PlanCopy
  // also brings its bytes back from host memory first (a copy is GPU
  // memory), ResourceExhausted when no GPU has room for them.
  absl::StatusOr<std::vector<Exporter::CopyPiece>> PlanCopy(uint64_t size);
  absl::Status CopyInto(absl::Span<const Exporter::CopyMemory> memory, uint64_t size);
  uint64_t allocated_bytes() const { return extents_.allocated_bytes(); }
  bool shared() const { return extents_.shared(); }
  // As ExtentMap's, with when the file was last used; only for a file
  // without dirty pages (Flush first), whose bytes are all in the arena.
  void EncodeTo(std::string* out) const;
  absl::Status DecodeFrom(absl::string_view* in);
  // As ExtentMap's (with when the file was last used), for a file without
  // dirty pages.
  void EncodeRangeTo(uint64_t offset, uint64_t end, std::string* out) const;
  struct Record {
    ExtentMap::Record map;
    uint64_t last_use = 0;
  };
  static bool ParseRecord(absl::string_view* in, Record* record);
  static void PutRecord(const Record& record, std::string* out);

  // As ExtentMap's. Cached pages stay as they are: they are the file's
  // bytes by offset, which a move does not change, and the blocks under
  // dirty ones stay mapped.
  absl::StatusOr<uint64_t> Move(absl::FunctionRef<bool(size_t part)> leave,
                                absl::Span<const size_t> to, uint64_t budget) {
    return extents_.Move(leave, to, budget);
  }
  absl::StatusOr<ExtentMap::PreparedMove> PrepareMove(absl::FunctionRef<bool(size_t part)> leave,
                                                      absl::Span<const size_t> to,
                                                      uint64_t budget) const {
    return extents_.PrepareMove(leave, to, budget);
  }
  uint64_t FinishMove(ExtentMap::PreparedMove move) { return extents_.FinishMove(std::move(move)); }
  uint64_t BytesIn(size_t part) const { return extents_.BytesIn(part); }
  // As ExtentMap's; cached pages stay, as for Move.
  absl::StatusOr<uint64_t> Compact(const CompactionPlan& plan) { return extents_.Compact(plan); }
  uint64_t BytesIn(const CompactionPlan& plan) const { return extents_.BytesIn(plan); }

  // When the file was last read or written here, in seconds since the
  // epoch: data moves out of a GPU least recently used first.
  uint32_t last_use() const { return last_use_.load(std::memory_order_relaxed); }

  uint64_t ino() const { return ino_; }

 private:
  static constexpr uint64_t kPage = PageCache::kPageSize;

  // extents_ was made with the file's Space.
  PageCache* cache() const { return static_cast<const Space&>(extents_.space()).cache; }
  void NoteUse();
  // Whether requests go through the cache at all.
  bool Cached() const { return cache()->enabled() && !extents_.shared(); }
  bool HasCachedPages() const {
    return cache()->enabled() && may_have_pages_.load(std::memory_order_relaxed);
  }
  // The arena, then the dirty pages over it (which are newer).
  absl::Status ReadAround(uint64_t offset, size_t length, char* out);
  // Small reads: page by page, filling missing pages from the arena.
  absl::Status ReadThroughCache(uint64_t offset, size_t length, char* out, uint64_t file_size);
  // Small writes: into cached pages, mapped in the arena for later. False
  // (and nothing changed) when the cache has no frames to spare.
  absl::StatusOr<bool> WriteThroughCache(uint64_t offset, const char* data, size_t length,
                                         uint64_t file_size);
  // Large writes, and small ones the cache has no room for: straight to the
  // arena, after flushing and dropping the cached pages they touch.
  absl::Status WriteAround(uint64_t offset, const char* data, size_t length);
  // Flushes the file if it has cached pages overlapping [offset, end), then
  // drops those pages: the caller is about to change the range in the arena.
  absl::Status FlushAndDrop(uint64_t offset, uint64_t end);

  const uint64_t ino_;  // names the file's pages in the cache
  // may_have_pages_ sits in its tail padding.
  [[no_unique_address]] ExtentMap extents_;
  // False until the file first puts a page in the cache: until then the
  // cache's locks need not be taken to learn that it holds nothing of the
  // file (a large stream, a file that is only read straight through, a
  // file deleted before it was written). Set under the file's lock, shared
  // or not, before the first page goes in.
  std::atomic<bool> may_have_pages_{false};
  // Set by readers under a shared lock too: only a hint. Beside
  // may_have_pages_, in the map's tail padding.
  std::atomic<uint32_t> last_use_{0};
  // Where the last small read ended: a read starting here is sequential and
  // reads ahead. Concurrent readers may race on it; it is only a hint.
  // Its low 32 bits: a read 4 GiB away that matches costs one needless
  // read-ahead, and the field fits beside last_use_.
  std::atomic<uint32_t> sequential_end_{~uint32_t{0}};
};

}  // namespace cudafs

#endif  // CUDAFS_CACHE_CACHED_FILE_H_
