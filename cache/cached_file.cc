#include "cache/cached_file.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

namespace cudafs {
namespace {

uint64_t RoundUp(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

CachedFile::CachedFile(PageCache* cache, uint64_t ino, Arena* arena, uint64_t max_extent)
    : cache_(cache), ino_(ino), extents_(arena, max_extent) {}

CachedFile::~CachedFile() {
  if (!cache_->enabled()) return;
  absl::MutexLock lock(&cache_->mu_);
  while (!pages_.empty()) Drop(pages_.begin());
}

absl::btree_map<uint64_t, CachedFile::Frame>::iterator CachedFile::Drop(
    absl::btree_map<uint64_t, Frame>::iterator it) {
  cache_->Free(it->second);
  return pages_.erase(it);  // a btree's erase invalidates other iterators
}

absl::Status CachedFile::Read(uint64_t offset, size_t length, char* out, uint64_t file_size) {
  if (!cache_->enabled()) return extents_.Read(offset, length, out);
  if (length < PageCache::kSmallRequest) return ReadThroughCache(offset, length, out, file_size);
  // Large: the arena serves it; dirty pages are newer.
  if (absl::Status status = extents_.Read(offset, length, out); !status.ok()) return status;
  OverlayDirty(offset, length, out);
  return absl::OkStatus();
}

void CachedFile::OverlayDirty(uint64_t offset, size_t length, char* out) {
  const uint64_t end = offset + length;
  absl::MutexLock lock(&cache_->mu_);
  if (dirty_pages_ == 0) return;
  for (auto it = pages_.lower_bound(offset / kPage); it != pages_.end(); ++it) {
    const uint64_t page_start = it->first * kPage;
    if (page_start >= end) break;
    if (!cache_->pages_[it->second].dirty) continue;
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPage);
    std::memcpy(out + (from - offset), cache_->FrameData(it->second) + (from - page_start),
                to - from);
  }
}

absl::Status CachedFile::ReadThroughCache(uint64_t offset, size_t length, char* out,
                                          uint64_t file_size) {
  const uint64_t end = offset + length;
  const uint64_t first = offset / kPage;
  const uint64_t last = (end - 1) / kPage;
  // Pages [fill_first, fill_end) to fetch from the arena: from the first
  // missing one to the last missing one, plus read-ahead when sequential.
  uint64_t fill_first = 0;
  uint64_t fill_end = 0;
  std::vector<bool> missed(last - first + 1, false);
  {
    absl::MutexLock lock(&cache_->mu_);
    for (uint64_t index = first; index <= last; ++index) {
      auto it = pages_.find(index);
      if (it == pages_.end()) {
        ++cache_->stats_.misses;
        missed[index - first] = true;
        if (fill_end == 0) fill_first = index;
        fill_end = index + 1;
        continue;
      }
      ++cache_->stats_.hits;
      const uint64_t page_start = index * kPage;
      const uint64_t from = std::max(offset, page_start);
      const uint64_t to = std::min(end, page_start + kPage);
      std::memcpy(out + (from - offset), cache_->FrameData(it->second) + (from - page_start),
                  to - from);
      cache_->Touch(it->second);
    }
  }
  const bool sequential = sequential_end_.exchange(end, std::memory_order_relaxed) == offset;
  if (fill_end == 0) return absl::OkStatus();
  if (sequential) {
    fill_end = std::max(fill_end, std::min(RoundUp(file_size, kPage) / kPage,
                                           fill_end + PageCache::kReadAhead / kPage));
  }

  char* staging = cache_->AcquireStaging();
  if (staging == nullptr) {  // no host memory for a fill: the arena, then what is newer
    if (absl::Status status = extents_.Read(offset, length, out); !status.ok()) return status;
    OverlayDirty(offset, length, out);
    return absl::OkStatus();
  }
  const uint64_t fill_start = fill_first * kPage;
  const uint64_t fill_bytes = (fill_end - fill_first) * kPage;
  absl::Status status = extents_.Read(fill_start, fill_bytes, staging);
  if (status.ok()) {
    absl::MutexLock lock(&cache_->mu_);
    for (uint64_t index = fill_first; index < fill_end; ++index) {
      const char* content = staging + (index - fill_first) * kPage;
      const uint64_t page_start = index * kPage;
      // A missed page is not dirty (writers are excluded), so the arena's
      // bytes are its bytes.
      if (index <= last && missed[index - first]) {
        const uint64_t from = std::max(offset, page_start);
        const uint64_t to = std::min(end, page_start + kPage);
        std::memcpy(out + (from - offset), content + (from - page_start), to - from);
      }
      if (pages_.contains(index)) continue;  // a hit, or cached by another reader
      const Frame frame = cache_->Take(this, index);
      if (frame == PageCache::kNoFrame) continue;
      std::memcpy(cache_->FrameData(frame), content, kPage);
      pages_.emplace(index, frame);
      cache_->AddClean(frame);
    }
  }
  cache_->ReleaseStaging(staging);
  return status;
}

absl::Status CachedFile::Write(uint64_t offset, const char* data, size_t length,
                               uint64_t file_size) {
  if (!cache_->enabled()) return extents_.Write(offset, data, length);
  if (length < PageCache::kSmallRequest) {
    absl::StatusOr<bool> cached = WriteThroughCache(offset, data, length, file_size);
    if (!cached.ok() || *cached) return cached.status();
    absl::MutexLock lock(&cache_->mu_);
    cache_->stats_.write_throughs += (offset + length - 1) / kPage - offset / kPage + 1;
  }
  return WriteAround(offset, data, length);
}

absl::Status CachedFile::WriteAround(uint64_t offset, const char* data, size_t length) {
  // Nothing older may overwrite the write later.
  if (absl::Status status = FlushAndDrop(offset, offset + length); !status.ok()) return status;
  return extents_.Write(offset, data, length);
}

absl::Status CachedFile::FlushAndDrop(uint64_t offset, uint64_t end) {
  const auto first_overlapping = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_->mu_) {
    auto it = pages_.lower_bound(offset / kPage);
    return it != pages_.end() && it->first * kPage < end ? it : pages_.end();
  };
  {
    absl::MutexLock lock(&cache_->mu_);
    if (first_overlapping() == pages_.end()) return absl::OkStatus();
  }
  // Pages at the edges hold bytes outside the range that may exist nowhere
  // else.
  if (absl::Status status = Flush(); !status.ok()) return status;
  absl::MutexLock lock(&cache_->mu_);
  for (auto it = first_overlapping(); it != pages_.end() && it->first * kPage < end;) {
    it = Drop(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CachedFile::WriteThroughCache(uint64_t offset, const char* data,
                                                   size_t length, uint64_t file_size) {
  const uint64_t end = offset + length;
  const uint64_t first = offset / kPage;
  const uint64_t count = (end - 1) / kPage - first + 1;
  // A frame for every page first: the cached one (pinned), or a new one
  // that is not yet in the file's map and so cannot be evicted. When the
  // cache is full of dirty pages the write goes around it rather than wait
  // for a flush: a working set larger than the cache gains nothing from
  // it, and the flusher is already at work (it starts at half).
  std::vector<Frame> frames(count, PageCache::kNoFrame);
  std::vector<bool> is_new(count, false);
  const auto give_back = [&]() {
    absl::MutexLock lock(&cache_->mu_);
    for (uint64_t i = 0; i < count; ++i) {
      if (frames[i] == PageCache::kNoFrame) continue;
      if (is_new[i]) {
        cache_->Free(frames[i]);
      } else {
        --cache_->pages_[frames[i]].pins;
      }
    }
  };
  bool have_frames = true;
  {
    absl::MutexLock lock(&cache_->mu_);
    for (uint64_t i = 0; i < count && have_frames; ++i) {
      if (auto it = pages_.find(first + i); it != pages_.end()) {
        frames[i] = it->second;
        ++cache_->pages_[it->second].pins;
        continue;
      }
      frames[i] = cache_->Take(this, first + i);
      is_new[i] = true;
      have_frames = frames[i] != PageCache::kNoFrame;
    }
  }
  if (!have_frames) {
    give_back();
    return false;
  }

  // A new frame starts as the page's current bytes: zeros past the end of
  // the file, else the arena's, unless the write covers the whole page.
  // Fetched before mapping, since a newly mapped block holds stale bytes
  // until the flush writes the page. New frames are reachable by no one
  // else yet, so they are filled without the lock.
  for (uint64_t i = 0; i < count; ++i) {
    if (!is_new[i]) continue;
    const uint64_t page_start = (first + i) * kPage;
    const bool whole = offset <= page_start && page_start + kPage <= end;
    if (whole) continue;
    char* frame_data = cache_->FrameData(frames[i]);
    if (page_start >= file_size) {
      std::memset(frame_data, 0, kPage);
      continue;
    }
    {
      absl::MutexLock lock(&cache_->mu_);
      ++cache_->stats_.misses;
    }
    if (absl::Status status = extents_.Read(page_start, kPage, frame_data); !status.ok()) {
      give_back();
      return status;
    }
  }
  if (absl::Status status = extents_.MapForWriteBack(first * kPage, count * kPage);
      !status.ok()) {
    give_back();
    return status;
  }

  absl::MutexLock lock(&cache_->mu_);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t page_start = (first + i) * kPage;
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPage);
    std::memcpy(cache_->FrameData(frames[i]) + (from - page_start), data + (from - offset),
                to - from);
    if (is_new[i]) {
      pages_.emplace(first + i, frames[i]);
    } else {
      ++cache_->stats_.hits;
      --cache_->pages_[frames[i]].pins;
    }
    cache_->MarkDirty(frames[i]);
  }
  return true;
}

absl::Status CachedFile::Flush() {
  if (!cache_->enabled()) return absl::OkStatus();
  for (;;) {
    std::vector<Frame> batch;
    std::vector<ExtentMap::Run> runs;
    {
      absl::MutexLock lock(&cache_->mu_);
      if (dirty_pages_ == 0) return absl::OkStatus();
      for (const auto& [index, frame] : pages_) {
        if (!cache_->pages_[frame].dirty) continue;
        // Straight from the frames (the device reads pinned memory itself);
        // contiguous pages in contiguous frames make one run.
        char* data = cache_->FrameData(frame);
        if (!runs.empty() && runs.back().offset + runs.back().length == index * kPage &&
            runs.back().data + runs.back().length == data) {
          runs.back().length += kPage;
        } else {
          runs.push_back({index * kPage, data, kPage});
        }
        batch.push_back(frame);
        if (batch.size() == PageCache::kFlushPages) break;
      }
    }
    // Written without the cache lock, which every other file's requests
    // need: the caller's exclusive hold of this file's lock keeps these
    // dirty frames as they are (dirty pages are never evicted).
    const absl::Status status = extents_.WriteMapped(runs);
    absl::MutexLock lock(&cache_->mu_);
    if (!status.ok()) return status;
    for (const Frame frame : batch) cache_->MarkClean(frame);
    ++cache_->stats_.flush_batches;
    cache_->stats_.flushed_bytes += batch.size() * kPage;
    cache_->stats_.flush_copies += runs.size();
  }
}

void CachedFile::DiscardRange(uint64_t offset, uint64_t end) {
  if (!cache_->enabled() || offset >= end) return;
  absl::MutexLock lock(&cache_->mu_);
  for (auto it = pages_.lower_bound(offset / kPage);
       it != pages_.end() && it->first * kPage < end;) {
    const uint64_t page_start = it->first * kPage;
    if (offset <= page_start && page_start + kPage <= end) {
      it = Drop(it);
      continue;
    }
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPage);
    std::memset(cache_->FrameData(it->second) + (from - page_start), 0, to - from);
    ++it;
  }
}

// The arena first: if it fails, the cached pages still hold the file's
// bytes (dirty ones may exist nowhere else).
absl::Status CachedFile::PunchHole(uint64_t offset, uint64_t length) {
  if (absl::Status status = extents_.PunchHole(offset, length); !status.ok()) return status;
  DiscardRange(offset, offset + length);
  return absl::OkStatus();
}

absl::Status CachedFile::Truncate(uint64_t size) {
  if (absl::Status status = extents_.Truncate(size); !status.ok()) return status;
  DiscardRange(size, ~uint64_t{0});
  return absl::OkStatus();
}

absl::Status CachedFile::CopyFrom(CachedFile& source, uint64_t source_offset, uint64_t offset,
                                  uint64_t length) {
  if (cache_->enabled()) {
    // The copy runs on the device: the source's newest bytes must be there,
    // and the target's cached pages in the range would be stale after it.
    if (absl::Status status = source.Flush(); !status.ok()) return status;
    if (absl::Status status = FlushAndDrop(offset, offset + length); !status.ok()) return status;
  }
  return extents_.CopyFrom(source.extents_, source_offset, offset, length);
}

}  // namespace cudafs
