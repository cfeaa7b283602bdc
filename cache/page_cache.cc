#include "cache/page_cache.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "cache/cached_file.h"

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

PageCache::PageCache(Device* device, uint64_t budget_bytes) : staging_(device, kFillBytes) {
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
  for (const CachedFile* file : dirty_files_) {
    mu_.AssertHeld();
    if (file->first_dirtied_ <= cutoff) inodes.push_back(file->ino());
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

PageCache::Frame PageCache::Take(CachedFile* owner, uint64_t index) {
  Frame frame = kNoFrame;
  if (!free_.empty()) {
    frame = free_.back();
    free_.pop_back();
  } else {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (pages_[*it].pins > 0) continue;
      frame = *it;
      Page& victim = pages_[frame];
      victim.owner->pages_.erase(victim.index);
      lru_.erase(it);
      break;
    }
    if (frame == kNoFrame) return kNoFrame;
  }
  Page& page = pages_[frame];
  page = Page{};
  page.owner = owner;
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
  CachedFile* owner = page.owner;
  if (owner->dirty_pages_++ == 0) {
    owner->first_dirtied_ = absl::Now();
    dirty_files_.insert(owner);
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
  CachedFile* owner = page.owner;
  if (--owner->dirty_pages_ == 0) dirty_files_.erase(owner);
}

void PageCache::Touch(Frame frame) {
  Page& page = pages_[frame];
  if (page.lru == lru_.end()) return;
  lru_.splice(lru_.end(), lru_, page.lru);
}

}  // namespace cudafs
