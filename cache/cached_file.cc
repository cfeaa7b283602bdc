#include "cache/cached_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/base/coding.h"
#include "alloc/base/status_macros.h"

namespace cudafs {
namespace {

uint64_t RoundUp(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

// With malloc's header an 80-byte chunk, one per file with data.
static_assert(sizeof(CachedFile) <= 72, "a CachedFile grew past its malloc chunk");

CachedFile::CachedFile(const Space* space, uint64_t ino) : ino_(ino), extents_(space) {}

CachedFile::~CachedFile() {
  if (HasCachedPages()) cache()->RemoveFile(ino_);
}

void CachedFile::NoteUse() {
  // Written once a second at most: readers of one file on many threads
  // would otherwise pass its cache line between them on every request.
  const auto now = static_cast<uint32_t>(absl::ToUnixSeconds(absl::Now()));
  if (last_use_.load(std::memory_order_relaxed) != now) {
    last_use_.store(now, std::memory_order_relaxed);
  }
}

absl::Status CachedFile::Read(uint64_t offset, size_t length, char* out, uint64_t file_size) {
  NoteUse();
  if (!Cached()) return extents_.Read(offset, length, out);
  if (length < PageCache::kSmallRequest) return ReadThroughCache(offset, length, out, file_size);
  // Large: the arena serves it; dirty pages are newer.
  return ReadAround(offset, length, out);
}

absl::Status CachedFile::ReadAround(uint64_t offset, size_t length, char* out) {
  CUDAFS_RETURN_IF_ERROR(extents_.Read(offset, length, out));
  if (HasCachedPages()) cache()->OverlayDirty(ino_, offset, length, out);
  return absl::OkStatus();
}

absl::Status CachedFile::ReadThroughCache(uint64_t offset, size_t length, char* out,
                                          uint64_t file_size) {
  const uint64_t end = offset + length;
  const uint64_t first = offset / kPage;
  const std::vector<bool> missed = cache()->ReadCached(ino_, offset, length, out);
  const bool sequential = sequential_end_.exchange(static_cast<uint32_t>(end),
                                                   std::memory_order_relaxed) ==
                          static_cast<uint32_t>(offset);
  const auto first_missed = std::find(missed.begin(), missed.end(), true);
  if (first_missed == missed.end()) return absl::OkStatus();
  // Pages [fill_first, fill_end) to fetch from the arena: from the first
  // missing one to the last missing one, plus read-ahead when sequential.
  const uint64_t fill_first = first + (first_missed - missed.begin());
  uint64_t fill_end = first + (missed.rend() - std::find(missed.rbegin(), missed.rend(), true));
  if (sequential) {
    fill_end = std::max(fill_end, std::min(RoundUp(file_size, kPage) / kPage,
                                           fill_end + PageCache::kReadAhead / kPage));
  }

  // A random read that found none of its pages, when the cache declines to
  // keep them: straight into `out`, as without a cache (none of them is
  // cached, so none is dirty).
  if (!sequential && std::find(missed.begin(), missed.end(), false) == missed.end() &&
      !cache()->AdmitsFill(ino_, fill_first)) {
    return extents_.Read(offset, length, out);
  }
  char* staging = cache()->AcquireStaging();
  // No host memory for a fill: the arena, then what is newer.
  if (staging == nullptr) return ReadAround(offset, length, out);
  const uint64_t fill_start = fill_first * kPage;
  const uint64_t fill_bytes = (fill_end - fill_first) * kPage;
  absl::Status status = extents_.Read(fill_start, fill_bytes, staging);
  if (status.ok()) {
    // A missed page is not dirty (writers are excluded), so the arena's
    // bytes are its bytes.
    for (uint64_t index = fill_first; index < first + missed.size(); ++index) {
      if (!missed[index - first]) continue;
      const uint64_t page_start = index * kPage;
      const uint64_t from = std::max(offset, page_start);
      const uint64_t to = std::min(end, page_start + kPage);
      std::memcpy(out + (from - offset), staging + (from - fill_start), to - from);
    }
    may_have_pages_.store(true, std::memory_order_relaxed);
    cache()->InsertClean(ino_, fill_first, fill_end - fill_first, staging);
  }
  cache()->ReleaseStaging(staging);
  return status;
}

absl::Status CachedFile::Write(uint64_t offset, const char* data, size_t length,
                               uint64_t file_size) {
  NoteUse();
  if (!Cached()) return extents_.Write(offset, data, length);
  if (length < PageCache::kSmallRequest) {
    absl::StatusOr<bool> cached = WriteThroughCache(offset, data, length, file_size);
    if (!cached.ok() || *cached) return cached.status();
    cache()->CountWriteThroughs(ino_, offset / kPage,
                                (offset + length - 1) / kPage - offset / kPage + 1);
  }
  return WriteAround(offset, data, length);
}

absl::Status CachedFile::WriteAround(uint64_t offset, const char* data, size_t length) {
  // Nothing older may overwrite the write later.
  CUDAFS_RETURN_IF_ERROR(FlushAndDrop(offset, offset + length));
  return extents_.Write(offset, data, length);
}

absl::Status CachedFile::FlushAndDrop(uint64_t offset, uint64_t end) {
  if (!HasCachedPages() || !cache()->HasPagesIn(ino_, offset, end)) return absl::OkStatus();
  // Pages at the edges hold bytes outside the range that may exist nowhere
  // else.
  CUDAFS_RETURN_IF_ERROR(Flush());
  cache()->DropPages(ino_, offset, end);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> CachedFile::Export(uint64_t size) {
  CUDAFS_RETURN_IF_ERROR(FlushAndDrop(0, std::numeric_limits<uint64_t>::max()));
  return extents_.Export(size);
}

absl::StatusOr<std::vector<Exporter::CopyPiece>> CachedFile::PlanCopy(uint64_t size) {
  CUDAFS_RETURN_IF_ERROR(Flush());
  CUDAFS_RETURN_IF_ERROR(extents_.LeaveSpill());
  return extents_.PlanCopy(size);
}

absl::Status CachedFile::CopyInto(absl::Span<const Exporter::CopyMemory> memory, uint64_t size) {
  CUDAFS_RETURN_IF_ERROR(Flush());
  return extents_.CopyInto(memory, size);
}

absl::StatusOr<bool> CachedFile::WriteThroughCache(uint64_t offset, const char* data,
                                                   size_t length, uint64_t file_size) {
  const uint64_t end = offset + length;
  const uint64_t first = offset / kPage;
  const uint64_t count = (end - 1) / kPage - first + 1;
  // A frame for every page first. When the cache is full of dirty pages the
  // write goes around it rather than wait for a flush: a working set larger
  // than the cache gains nothing from it, and the flusher is already at
  // work (it starts at half).
  PageCache::WriteFrames write;
  may_have_pages_.store(true, std::memory_order_relaxed);
  if (!cache()->ReserveForWrite(ino_, first, count, &write)) return false;

  // A new frame starts as the page's current bytes: zeros past the end of
  // the file, else the arena's, unless the write covers the whole page.
  // Fetched before mapping, since a newly mapped block holds stale bytes
  // until the flush writes the page.
  for (uint64_t i = 0; i < count; ++i) {
    if (!write.is_new[i]) continue;
    const uint64_t page_start = (first + i) * kPage;
    const bool whole = offset <= page_start && page_start + kPage <= end;
    if (whole) continue;
    char* frame_data = cache()->FrameData(write.frames[i]);
    if (page_start >= file_size) {
      std::memset(frame_data, 0, kPage);
      continue;
    }
    cache()->CountMiss(ino_, first + i);
    if (absl::Status status = extents_.Read(page_start, kPage, frame_data); !status.ok()) {
      cache()->CancelWrite(write);
      return status;
    }
  }
  if (absl::Status status = extents_.MapForWriteBack(first * kPage, count * kPage);
      !status.ok()) {
    cache()->CancelWrite(write);
    return status;
  }
  cache()->CommitWrite(write, offset, data, length);
  return true;
}

void CachedFile::EncodeTo(std::string* out) const {
  extents_.EncodeTo(out);
  PutVarint(out, last_use());
}

void CachedFile::EncodeRangeTo(uint64_t offset, uint64_t end, std::string* out) const {
  extents_.EncodeRangeTo(offset, end, out);
  PutVarint(out, last_use());
}

bool CachedFile::ParseRecord(absl::string_view* in, Record* record) {
  return ExtentMap::ParseRecord(in, &record->map) &&
         GetVarintUpTo(in, UINT32_MAX, &record->last_use);
}

void CachedFile::PutRecord(const Record& record, std::string* out) {
  ExtentMap::PutRecord(record.map, out);
  PutVarint(out, record.last_use);
}

absl::Status CachedFile::DecodeFrom(absl::string_view* in) {
  CUDAFS_RETURN_IF_ERROR(extents_.DecodeFrom(in));
  uint64_t last_use = 0;
  if (!GetVarintUpTo(in, UINT32_MAX, &last_use)) {
    return absl::InvalidArgumentError("file: a record cut short");
  }
  last_use_.store(static_cast<uint32_t>(last_use), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status CachedFile::Flush() {
  if (!HasCachedPages()) return absl::OkStatus();
  for (;;) {
    const PageCache::FlushBatch batch = cache()->CollectDirty(ino_);
    if (batch.frames.empty()) return absl::OkStatus();
    // Written without the cache lock, which every other file's requests
    // need: the caller's exclusive hold of this file's lock keeps these
    // dirty frames as they are (dirty pages are never evicted).
    CUDAFS_RETURN_IF_ERROR(extents_.WriteMapped(batch.runs));
    cache()->MarkFlushed(batch);
  }
}

// The arena first: if it fails, the cached pages still hold the file's
// bytes (dirty ones may exist nowhere else).
absl::Status CachedFile::PunchHole(uint64_t offset, uint64_t length) {
  CUDAFS_RETURN_IF_ERROR(extents_.PunchHole(offset, length));
  if (HasCachedPages()) cache()->DiscardRange(ino_, offset, offset + length);
  return absl::OkStatus();
}

absl::Status CachedFile::Truncate(uint64_t size) {
  CUDAFS_RETURN_IF_ERROR(extents_.Truncate(size));
  if (HasCachedPages()) cache()->DiscardRange(ino_, size, ~uint64_t{0});
  return absl::OkStatus();
}

absl::Status CachedFile::CopyFrom(CachedFile& source, uint64_t source_offset,
                                  uint64_t source_size, uint64_t offset, uint64_t length,
                                  uint64_t file_size) {
  // cp of a tree just written: the device's copy would cost a flush of the
  // source, a copy and a wait, three trips to the GPU for a few pages.
  if (Cached() && length > 0 && length < PageCache::kSmallRequest) {
    const std::unique_ptr<char[]> bytes = std::make_unique_for_overwrite<char[]>(length);
    CUDAFS_RETURN_IF_ERROR(source.Read(source_offset, length, bytes.get(), source_size));
    return Write(offset, bytes.get(), length, file_size);
  }
  if (cache()->enabled()) {
    // The copy runs on the device: the source's newest bytes must be there,
    // and the target's cached pages in the range would be stale after it.
    CUDAFS_RETURN_IF_ERROR(source.Flush());
    CUDAFS_RETURN_IF_ERROR(FlushAndDrop(offset, offset + length));
  }
  return extents_.CopyFrom(source.extents_, source_offset, offset, length);
}

}  // namespace cudafs
