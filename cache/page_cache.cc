#include "cache/page_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace cudafs {

std::string PageCacheStats::ToText() const {
  const double bytes_per_batch =
      flush_batches == 0 ? 0 : static_cast<double>(flushed_bytes) / flush_batches;
  return absl::StrFormat(
      "cache_budget_bytes %d\ncached_bytes %d\ndirty_bytes %d\nhits %d\nmisses %d\n"
      "write_throughs %d\nflush_batches %d\nflushed_bytes %d\nflush_copies %d\n"
      "bytes_per_flush %.0f\n",
      budget_bytes, cached_bytes, dirty_bytes, hits, misses, write_throughs, flush_batches,
      flushed_bytes, flush_copies, bytes_per_batch);
}

PageCache::PageCache(Device* device, uint64_t budget_bytes)
    : flush_pages_(std::min<uint64_t>(device->max_batch_copies(), kMaxFlushPages)),
      staging_(device, kFillBytes) {
  const uint64_t frames = std::min<uint64_t>(budget_bytes / kPageSize, kNoFrame - 1);
  if (frames > 0) {
    frames_ = PinnedBuffer(device, frames * kPageSize);
    if (frames_.data() != nullptr) frame_count_ = static_cast<uint32_t>(frames);
  }
  absl::MutexLock lock(&mu_);
  stats_.budget_bytes = uint64_t{frame_count_} * kPageSize;
  pages_.resize(frame_count_);
  free_.reserve(frame_count_);
  // Taken from the back: frames are used from the start of the pool.
  for (Frame frame = frame_count_; frame > 0; --frame) free_.push_back(frame - 1);
}

PageCacheStats PageCache::Stats() const {
  absl::MutexLock lock(&mu_);
  PageCacheStats stats = stats_;
  stats.cached_bytes = uint64_t{frame_count_ - static_cast<uint32_t>(free_.size())} * kPageSize;
  stats.dirty_bytes = dirty_pages_ * kPageSize;
  return stats;
}

std::vector<uint64_t> PageCache::DirtyFiles(absl::Duration age) const {
  const absl::Time cutoff = absl::Now() - age;
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> inodes;
  for (const uint32_t slot : dirty_files_) {
    const FilePages& file = files_[slot];
    if (file.first_dirtied <= cutoff) inodes.push_back(file.ino);
  }
  return inodes;
}

bool PageCache::WaitForPressure(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto under_pressure = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return dirty_pages_ * 2 > frame_count_;
  };
  if (under_pressure()) return true;
  pressure_.WaitWithTimeout(&mu_, timeout);
  return under_pressure();
}

void PageCache::Wake() {
  absl::MutexLock lock(&mu_);
  pressure_.SignalAll();
}

PageCache::FileId PageCache::AddFile(uint64_t ino) {
  if (!enabled()) return FileId{kNoFile};
  absl::MutexLock lock(&mu_);
  uint32_t slot;
  if (!free_files_.empty()) {
    slot = free_files_.back();
    free_files_.pop_back();
  } else {
    slot = static_cast<uint32_t>(files_.size());
    files_.emplace_back();
  }
  files_[slot].ino = ino;
  return FileId{slot};
}

void PageCache::RemoveFile(FileId file) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  FilePages& pages = Pages(file);
  while (!pages.pages.empty()) Drop(pages, pages.pages.begin());
  free_files_.push_back(static_cast<uint32_t>(file));
}

std::vector<bool> PageCache::ReadCached(FileId file, uint64_t offset, size_t length, char* out) {
  const uint64_t end = offset + length;
  const uint64_t first = offset / kPageSize;
  const uint64_t last = (end - 1) / kPageSize;
  std::vector<bool> missed(last - first + 1, false);
  absl::MutexLock lock(&mu_);
  const PageMap& pages = Pages(file).pages;
  for (uint64_t index = first; index <= last; ++index) {
    auto it = pages.find(index);
    if (it == pages.end()) {
      ++stats_.misses;
      missed[index - first] = true;
      continue;
    }
    ++stats_.hits;
    const uint64_t page_start = index * kPageSize;
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPageSize);
    std::memcpy(out + (from - offset), FrameData(it->second) + (from - page_start), to - from);
    Touch(it->second);
  }
  return missed;
}

void PageCache::InsertClean(FileId file, uint64_t first, uint64_t count, const char* content) {
  absl::MutexLock lock(&mu_);
  PageMap& pages = Pages(file).pages;
  for (uint64_t index = first; index < first + count; ++index) {
    if (pages.contains(index)) continue;  // a hit, or cached by another reader
    const Frame frame = Take(file, index);
    if (frame == kNoFrame) continue;
    std::memcpy(FrameData(frame), content + (index - first) * kPageSize, kPageSize);
    pages.emplace(index, frame);
    AddClean(frame);
  }
}

void PageCache::OverlayDirty(FileId file, uint64_t offset, size_t length, char* out) {
  const uint64_t end = offset + length;
  absl::MutexLock lock(&mu_);
  const FilePages& pages = Pages(file);
  if (pages.dirty_pages == 0) return;
  for (auto it = pages.pages.lower_bound(offset / kPageSize); it != pages.pages.end(); ++it) {
    const uint64_t page_start = it->first * kPageSize;
    if (page_start >= end) break;
    if (!pages_[it->second].dirty) continue;
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPageSize);
    std::memcpy(out + (from - offset), FrameData(it->second) + (from - page_start), to - from);
  }
}

bool PageCache::ReserveForWrite(FileId file, uint64_t first, uint64_t count, WriteFrames* write) {
  write->file = file;
  write->first = first;
  write->frames.assign(count, kNoFrame);
  write->is_new.assign(count, false);
  bool have_frames = true;
  {
    absl::MutexLock lock(&mu_);
    const PageMap& pages = Pages(file).pages;
    for (uint64_t i = 0; i < count && have_frames; ++i) {
      if (auto it = pages.find(first + i); it != pages.end()) {
        write->frames[i] = it->second;
        ++pages_[it->second].pins;
        continue;
      }
      write->frames[i] = Take(file, first + i);
      write->is_new[i] = true;
      have_frames = write->frames[i] != kNoFrame;
    }
  }
  if (!have_frames) CancelWrite(*write);
  return have_frames;
}

void PageCache::CancelWrite(const WriteFrames& write) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < write.frames.size(); ++i) {
    if (write.frames[i] == kNoFrame) continue;
    if (write.is_new[i]) {
      Free(write.frames[i]);
    } else {
      --pages_[write.frames[i]].pins;
    }
  }
}

void PageCache::CommitWrite(const WriteFrames& write, uint64_t offset, const char* data,
                            size_t length) {
  const uint64_t end = offset + length;
  absl::MutexLock lock(&mu_);
  PageMap& pages = Pages(write.file).pages;
  for (size_t i = 0; i < write.frames.size(); ++i) {
    const Frame frame = write.frames[i];
    const uint64_t page_start = (write.first + i) * kPageSize;
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPageSize);
    std::memcpy(FrameData(frame) + (from - page_start), data + (from - offset), to - from);
    if (write.is_new[i]) {
      pages.emplace(write.first + i, frame);
    } else {
      ++stats_.hits;
      --pages_[frame].pins;
    }
    MarkDirty(frame);
  }
}

PageCache::FlushBatch PageCache::CollectDirty(FileId file) {
  FlushBatch batch;
  absl::MutexLock lock(&mu_);
  const FilePages& pages = Pages(file);
  if (pages.dirty_pages == 0) return batch;
  std::vector<ExtentMap::Run>& runs = batch.runs;
  for (const auto& [index, frame] : pages.pages) {
    if (!pages_[frame].dirty) continue;
    // Straight from the frames (the device reads pinned memory itself);
    // contiguous pages in contiguous frames make one run.
    char* data = FrameData(frame);
    if (!runs.empty() && runs.back().offset + runs.back().length == index * kPageSize &&
        runs.back().data + runs.back().length == data) {
      runs.back().length += kPageSize;
    } else {
      runs.push_back({index * kPageSize, data, kPageSize});
    }
    batch.frames.push_back(frame);
    if (batch.frames.size() == flush_pages_) break;
  }
  return batch;
}

void PageCache::MarkFlushed(const FlushBatch& batch) {
  absl::MutexLock lock(&mu_);
  for (const Frame frame : batch.frames) MarkClean(frame);
  ++stats_.flush_batches;
  stats_.flushed_bytes += batch.frames.size() * kPageSize;
  stats_.flush_copies += batch.runs.size();
}

bool PageCache::HasPagesIn(FileId file, uint64_t offset, uint64_t end) {
  absl::MutexLock lock(&mu_);
  const PageMap& pages = Pages(file).pages;
  auto it = pages.lower_bound(offset / kPageSize);
  return it != pages.end() && it->first * kPageSize < end;
}

void PageCache::DropPages(FileId file, uint64_t offset, uint64_t end) {
  absl::MutexLock lock(&mu_);
  FilePages& pages = Pages(file);
  for (auto it = pages.pages.lower_bound(offset / kPageSize);
       it != pages.pages.end() && it->first * kPageSize < end;) {
    it = Drop(pages, it);
  }
}

void PageCache::DiscardRange(FileId file, uint64_t offset, uint64_t end) {
  if (offset >= end) return;
  absl::MutexLock lock(&mu_);
  FilePages& pages = Pages(file);
  for (auto it = pages.pages.lower_bound(offset / kPageSize);
       it != pages.pages.end() && it->first * kPageSize < end;) {
    const uint64_t page_start = it->first * kPageSize;
    if (offset <= page_start && page_start + kPageSize <= end) {
      it = Drop(pages, it);
      continue;
    }
    const uint64_t from = std::max(offset, page_start);
    const uint64_t to = std::min(end, page_start + kPageSize);
    std::memset(FrameData(it->second) + (from - page_start), 0, to - from);
    ++it;
  }
}

void PageCache::CountMiss() {
  absl::MutexLock lock(&mu_);
  ++stats_.misses;
}

void PageCache::CountWriteThroughs(uint64_t pages) {
  absl::MutexLock lock(&mu_);
  stats_.write_throughs += pages;
}

PageCache::Frame PageCache::Take(FileId owner, uint64_t index) {
  Frame frame = kNoFrame;
  if (!free_.empty()) {
    frame = free_.back();
    free_.pop_back();
  } else {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (pages_[*it].pins > 0) continue;
      frame = *it;
      Page& victim = pages_[frame];
      files_[victim.owner].pages.erase(victim.index);
      lru_.erase(it);
      break;
    }
    if (frame == kNoFrame) return kNoFrame;
  }
  Page& page = pages_[frame];
  page = Page{};
  page.owner = static_cast<uint32_t>(owner);
  page.index = index;
  page.lru = lru_.end();
  return frame;
}

void PageCache::Free(Frame frame) {
  Page& page = pages_[frame];
  if (page.dirty) ForgetDirty(page);
  if (page.lru != lru_.end()) lru_.erase(page.lru);
  page = Page{};
  page.lru = lru_.end();
  free_.push_back(frame);
}

PageCache::PageMap::iterator PageCache::Drop(FilePages& file, PageMap::iterator it) {
  Free(it->second);
  return file.pages.erase(it);  // a btree's erase invalidates other iterators
}

void PageCache::AddClean(Frame frame) {
  pages_[frame].lru = lru_.insert(lru_.end(), frame);
}

void PageCache::MarkDirty(Frame frame) {
  Page& page = pages_[frame];
  if (page.dirty) return;
  if (page.lru != lru_.end()) {
    lru_.erase(page.lru);
    page.lru = lru_.end();
  }
  page.dirty = true;
  ++dirty_pages_;
  FilePages& owner = files_[page.owner];
  if (owner.dirty_pages++ == 0) {
    owner.first_dirtied = absl::Now();
    dirty_files_.insert(page.owner);
  }
  if (dirty_pages_ * 2 > frame_count_) pressure_.Signal();
}

void PageCache::MarkClean(Frame frame) {
  Page& page = pages_[frame];
  if (!page.dirty) return;
  ForgetDirty(page);
  page.lru = lru_.insert(lru_.end(), frame);
}

void PageCache::ForgetDirty(Page& page) {
  page.dirty = false;
  --dirty_pages_;
  if (--files_[page.owner].dirty_pages == 0) dirty_files_.erase(page.owner);
}

void PageCache::Touch(Frame frame) {
  Page& page = pages_[frame];
  if (page.lru == lru_.end()) return;
  lru_.splice(lru_.end(), lru_, page.lru);
}

}  // namespace cudafs
