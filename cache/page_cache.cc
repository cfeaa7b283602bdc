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

namespace {

// Where a file's chunks start among the shards: its chunks then take the
// shards in turn from there, so one file's pages spread evenly over every
// shard (it can fill the whole cache) and different files start apart.
uint64_t FirstShardOf(uint64_t ino) {
  uint64_t x = ino * 0x9e3779b97f4a7c15;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9;
  x ^= x >> 29;
  return x;
}

}  // namespace

PageCache::PageCache(Device* device, uint64_t budget_bytes)
    : flush_pages_(std::min<uint64_t>(device->max_batch_copies(), kMaxFlushPages)),
      staging_(device, kFillBytes) {
  uint64_t frames = std::min<uint64_t>(budget_bytes / kPageSize, kNoFrame - 1);
  while (shard_count_ < kMaxShards && frames / (2 * shard_count_) >= kMinShardFrames) {
    shard_count_ *= 2;
  }
  frames -= frames % shard_count_;
  if (frames > 0) {
    frames_ = PinnedBuffer(device, frames * kPageSize);
    if (frames_.data() != nullptr) frame_count_ = static_cast<uint32_t>(frames);
  }
  frames_per_shard_ = frame_count_ / shard_count_;
  shards_ = std::make_unique<Shard[]>(shard_count_);
  for (uint32_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    shard.first = i * frames_per_shard_;
    shard.total_dirty = &dirty_pages_;
    shard.pages.resize(frames_per_shard_);
    shard.free.reserve(frames_per_shard_);
    // Taken from the back: frames are used from the start of the shard.
    for (Frame frame = shard.first + frames_per_shard_; frame > shard.first; --frame) {
      shard.free.push_back(frame - 1);
    }
  }
}

PageCache::Shard& PageCache::ShardOf(uint64_t ino, uint64_t index) const {
  return shards_[(FirstShardOf(ino) + index / kChunkPages) & (shard_count_ - 1)];
}

template <typename Fn>
void PageCache::ForEachChunk(uint64_t ino, uint64_t first, uint64_t end, Fn fn) const {
  while (first < end) {
    const uint64_t chunk_end = std::min(end, (first / kChunkPages + 1) * kChunkPages);
    if (!fn(ShardOf(ino, first), first, chunk_end)) return;
    first = chunk_end;
  }
}

template <typename Fn>
void PageCache::ForEachShardOf(uint64_t ino, uint64_t first, uint64_t end, Fn fn) const {
  if (first >= end) return;
  const uint64_t chunks = (end - 1) / kChunkPages - first / kChunkPages + 1;
  if (chunks <= shard_count_) return ForEachChunk(ino, first, end, fn);
  for (uint32_t i = 0; i < shard_count_; ++i) {
    if (!fn(shards_[i], first, end)) return;
  }
}

namespace {

// Pages [first, end) holding the bytes [offset, end_offset); end_offset may
// be ~0 (to the end of any file).
uint64_t FirstPage(uint64_t offset) { return offset / PageCache::kPageSize; }
uint64_t EndPage(uint64_t end_offset) {
  return end_offset == 0 ? 0 : (end_offset - 1) / PageCache::kPageSize + 1;
}

}  // namespace

PageCacheStats PageCache::Stats() const {
  PageCacheStats stats;
  stats.budget_bytes = uint64_t{frame_count_} * kPageSize;
  for (uint32_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    stats.cached_bytes += (frames_per_shard_ - shard.free.size()) * kPageSize;
    stats.dirty_bytes += shard.dirty_pages * kPageSize;
    stats.hits += shard.hits;
    stats.misses += shard.misses;
    stats.write_throughs += shard.write_throughs;
  }
  stats.flush_batches = flush_batches_.load(std::memory_order_relaxed);
  stats.flushed_bytes = flushed_bytes_.load(std::memory_order_relaxed);
  stats.flush_copies = flush_copies_.load(std::memory_order_relaxed);
  return stats;
}

std::vector<uint64_t> PageCache::DirtyFiles(absl::Duration age) const {
  const absl::Time cutoff = absl::Now() - age;
  absl::flat_hash_set<uint64_t> inodes;
  for (uint32_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    for (const uint64_t ino : shard.dirty_files) {
      if (shard.files.at(ino).first_dirtied <= cutoff) inodes.insert(ino);
    }
  }
  return std::vector<uint64_t>(inodes.begin(), inodes.end());
}

bool PageCache::WaitForPressure(absl::Duration timeout) {
  absl::MutexLock lock(&pressure_mu_);
  // Set before the check, as a writer counts before it looks at the flag:
  // one of the two sees the other.
  flusher_waiting_.store(true);
  const auto under_pressure = [this] { return dirty_pages_.load() * 2 > frame_count_; };
  if (!under_pressure()) pressure_.WaitWithTimeout(&pressure_mu_, timeout);
  flusher_waiting_.store(false);
  return under_pressure();
}

void PageCache::Wake() {
  absl::MutexLock lock(&pressure_mu_);
  pressure_.SignalAll();
}

void PageCache::SignalPressure() {
  if (dirty_pages_.load() * 2 <= frame_count_ || !flusher_waiting_.load()) return;
  absl::MutexLock lock(&pressure_mu_);
  pressure_.Signal();
}

void PageCache::RemoveFile(uint64_t ino) {
  if (!enabled()) return;
  for (uint32_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    auto file = shard.files.find(ino);
    if (file == shard.files.end()) continue;
    PageMap& pages = file->second.pages;
    for (auto it = pages.begin(); it != pages.end();) it = shard.Drop(file->second, it);
    shard.files.erase(file);
  }
}

std::vector<bool> PageCache::ReadCached(uint64_t ino, uint64_t offset, size_t length,
                                        char* out) {
  const uint64_t end = offset + length;
  const uint64_t first = FirstPage(offset);
  std::vector<bool> missed(EndPage(end) - first, false);
  ForEachChunk(ino, first, EndPage(end), [&](Shard& shard, uint64_t from_page, uint64_t to_page) {
    absl::MutexLock lock(&shard.mu);
    const auto file = shard.files.find(ino);
    const PageMap* pages = file == shard.files.end() ? nullptr : &file->second.pages;
    for (uint64_t index = from_page; index < to_page; ++index) {
      Frame frame = kNoFrame;
      if (pages != nullptr) {
        if (auto it = pages->find(index); it != pages->end()) frame = it->second;
      }
      if (frame == kNoFrame) {
        ++shard.misses;
        missed[index - first] = true;
        continue;
      }
      ++shard.hits;
      const uint64_t page_start = index * kPageSize;
      const uint64_t from = std::max(offset, page_start);
      const uint64_t to = std::min(end, page_start + kPageSize);
      std::memcpy(out + (from - offset), FrameData(frame) + (from - page_start), to - from);
      shard.Touch(frame);
    }
    return true;
  });
  return missed;
}

bool PageCache::AdmitsFill(uint64_t ino, uint64_t index) {
  Shard& shard = ShardOf(ino, index);
  absl::MutexLock lock(&shard.mu);
  return !shard.free.empty() || ++shard.declined_fills % kAdmitOneIn == 0;
}

void PageCache::InsertClean(uint64_t ino, uint64_t first, uint64_t count, const char* content) {
  ForEachChunk(ino, first, first + count, [&](Shard& shard, uint64_t from, uint64_t to) {
    absl::MutexLock lock(&shard.mu);
    for (uint64_t index = from; index < to; ++index) {
      // Looked up again for each page: Take may erase the file's entry.
      if (auto file = shard.files.find(ino);
          file != shard.files.end() && file->second.pages.contains(index)) {
        continue;  // a hit, or cached by another reader
      }
      const Frame frame = shard.Take(ino, index);
      if (frame == kNoFrame) return false;
      std::memcpy(FrameData(frame), content + (index - first) * kPageSize, kPageSize);
      shard.files[ino].pages.emplace(index, frame);
      shard.LruAppend(frame);
    }
    return true;
  });
}

void PageCache::OverlayDirty(uint64_t ino, uint64_t offset, size_t length, char* out) {
  const uint64_t end = offset + length;
  ForEachShardOf(ino, FirstPage(offset), EndPage(end),
                 [&](Shard& shard, uint64_t from_page, uint64_t to_page) {
                   absl::MutexLock lock(&shard.mu);
                   const auto file = shard.files.find(ino);
                   if (file == shard.files.end() || file->second.dirty_pages == 0) return true;
                   const PageMap& pages = file->second.pages;
                   for (auto it = pages.lower_bound(from_page);
                        it != pages.end() && it->first < to_page; ++it) {
                     if (!shard.PageOf(it->second).dirty) continue;
                     const uint64_t page_start = it->first * kPageSize;
                     const uint64_t from = std::max(offset, page_start);
                     const uint64_t to = std::min(end, page_start + kPageSize);
                     std::memcpy(out + (from - offset),
                                 FrameData(it->second) + (from - page_start), to - from);
                   }
                   return true;
                 });
}

bool PageCache::ReserveForWrite(uint64_t ino, uint64_t first, uint64_t count,
                                WriteFrames* write) {
  write->ino = ino;
  write->first = first;
  write->frames.assign(count, kNoFrame);
  write->is_new.assign(count, false);
  bool have_frames = true;
  ForEachChunk(ino, first, first + count, [&](Shard& shard, uint64_t from, uint64_t to) {
    absl::MutexLock lock(&shard.mu);
    for (uint64_t index = from; index < to; ++index) {
      const uint64_t i = index - first;
      if (auto file = shard.files.find(ino); file != shard.files.end()) {
        if (auto it = file->second.pages.find(index); it != file->second.pages.end()) {
          write->frames[i] = it->second;
          ++shard.PageOf(it->second).pins;
          continue;
        }
      }
      write->frames[i] = shard.Take(ino, index);
      write->is_new[i] = true;
      if (write->frames[i] == kNoFrame) {
        have_frames = false;
        return false;
      }
    }
    return true;
  });
  if (!have_frames) CancelWrite(*write);
  return have_frames;
}

void PageCache::CancelWrite(const WriteFrames& write) {
  for (size_t i = 0; i < write.frames.size(); ++i) {
    const Frame frame = write.frames[i];
    if (frame == kNoFrame) continue;
    Shard& shard = ShardOfFrame(frame);
    absl::MutexLock lock(&shard.mu);
    if (write.is_new[i]) {
      shard.Free(frame);
    } else {
      --shard.PageOf(frame).pins;
    }
  }
}

void PageCache::CommitWrite(const WriteFrames& write, uint64_t offset, const char* data,
                            size_t length) {
  const uint64_t end = offset + length;
  const uint64_t first = write.first;
  ForEachChunk(write.ino, first, first + write.frames.size(),
               [&](Shard& shard, uint64_t from_page, uint64_t to_page) {
                 absl::MutexLock lock(&shard.mu);
                 for (uint64_t index = from_page; index < to_page; ++index) {
                   const Frame frame = write.frames[index - first];
                   const uint64_t page_start = index * kPageSize;
                   const uint64_t from = std::max(offset, page_start);
                   const uint64_t to = std::min(end, page_start + kPageSize);
                   std::memcpy(FrameData(frame) + (from - page_start), data + (from - offset),
                               to - from);
                   if (write.is_new[index - first]) {
                     shard.files[write.ino].pages.emplace(index, frame);
                   } else {
                     ++shard.hits;
                     --shard.PageOf(frame).pins;
                   }
                   shard.MarkDirty(frame);
                 }
                 return true;
               });
  SignalPressure();
}

PageCache::FlushBatch PageCache::CollectDirty(uint64_t ino) {
  // (page index, frame) of the file's dirty pages, from every shard: at
  // most a batch from each, of which the batch takes the first in order.
  std::vector<std::pair<uint64_t, Frame>> dirty;
  for (uint32_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    const auto file = shard.files.find(ino);
    if (file == shard.files.end() || file->second.dirty_pages == 0) continue;
    uint64_t taken = 0;
    for (const auto& [index, frame] : file->second.pages) {
      if (!shard.PageOf(frame).dirty) continue;
      dirty.emplace_back(index, frame);
      if (++taken == flush_pages_) break;
    }
  }
  std::sort(dirty.begin(), dirty.end());
  if (dirty.size() > flush_pages_) dirty.resize(flush_pages_);

  FlushBatch batch;
  std::vector<ExtentMap::Run>& runs = batch.runs;
  for (const auto& [index, frame] : dirty) {
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
  }
  return batch;
}

void PageCache::MarkFlushed(const FlushBatch& batch) {
  // By shard, each lock taken once: a shard's frames are contiguous.
  std::vector<Frame> frames = batch.frames;
  std::sort(frames.begin(), frames.end());
  for (auto group = frames.begin(); group != frames.end();) {
    Shard& shard = ShardOfFrame(*group);
    const auto group_end = std::find_if(
        group, frames.end(), [&](Frame frame) { return &ShardOfFrame(frame) != &shard; });
    absl::MutexLock lock(&shard.mu);
    for (; group != group_end; ++group) shard.MarkClean(*group);
  }
  flush_batches_.fetch_add(1, std::memory_order_relaxed);
  flushed_bytes_.fetch_add(batch.frames.size() * kPageSize, std::memory_order_relaxed);
  flush_copies_.fetch_add(batch.runs.size(), std::memory_order_relaxed);
}

bool PageCache::HasPagesIn(uint64_t ino, uint64_t offset, uint64_t end) {
  bool found = false;
  ForEachShardOf(ino, FirstPage(offset), EndPage(end),
                 [&](Shard& shard, uint64_t from_page, uint64_t to_page) {
                   absl::MutexLock lock(&shard.mu);
                   const auto file = shard.files.find(ino);
                   if (file == shard.files.end()) return true;
                   const auto it = file->second.pages.lower_bound(from_page);
                   found = it != file->second.pages.end() && it->first < to_page;
                   return !found;
                 });
  return found;
}

void PageCache::DropPages(uint64_t ino, uint64_t offset, uint64_t end) {
  DiscardPages(ino, offset, end, /*zero_partial=*/false);
}

void PageCache::DiscardRange(uint64_t ino, uint64_t offset, uint64_t end) {
  DiscardPages(ino, offset, end, /*zero_partial=*/true);
}

void PageCache::DiscardPages(uint64_t ino, uint64_t offset, uint64_t end, bool zero_partial) {
  if (offset >= end) return;
  ForEachShardOf(ino, FirstPage(offset), EndPage(end),
                 [&](Shard& shard, uint64_t from_page, uint64_t to_page) {
                   absl::MutexLock lock(&shard.mu);
                   const auto file = shard.files.find(ino);
                   if (file == shard.files.end()) return true;
                   PageMap& pages = file->second.pages;
                   for (auto it = pages.lower_bound(from_page);
                        it != pages.end() && it->first < to_page;) {
                     const uint64_t page_start = it->first * kPageSize;
                     if (!zero_partial || (offset <= page_start && page_start + kPageSize <= end)) {
                       it = shard.Drop(file->second, it);
                       continue;
                     }
                     const uint64_t from = std::max(offset, page_start);
                     const uint64_t to = std::min(end, page_start + kPageSize);
                     std::memset(FrameData(it->second) + (from - page_start), 0, to - from);
                     ++it;
                   }
                   shard.EraseIfEmpty(ino);
                   return true;
                 });
}

void PageCache::CountMiss(uint64_t ino, uint64_t index) {
  Shard& shard = ShardOf(ino, index);
  absl::MutexLock lock(&shard.mu);
  ++shard.misses;
}

void PageCache::CountWriteThroughs(uint64_t ino, uint64_t index, uint64_t pages) {
  Shard& shard = ShardOf(ino, index);
  absl::MutexLock lock(&shard.mu);
  shard.write_throughs += pages;
}

PageCache::Frame PageCache::Shard::Take(uint64_t ino, uint64_t index) {
  Frame frame = kNoFrame;
  if (!free.empty()) {
    frame = free.back();
    free.pop_back();
  } else {
    for (Frame candidate = lru_oldest; candidate != kNoFrame;
         candidate = PageOf(candidate).lru_next) {
      if (PageOf(candidate).pins > 0) continue;
      frame = candidate;
      const Page& victim = PageOf(frame);
      files.at(victim.owner).pages.erase(victim.index);
      EraseIfEmpty(victim.owner);
      LruRemove(frame);
      break;
    }
    if (frame == kNoFrame) return kNoFrame;
  }
  Page& page = PageOf(frame);
  page = Page{};
  page.owner = ino;
  page.index = index;
  return frame;
}

void PageCache::Shard::Free(Frame frame) {
  Page& page = PageOf(frame);
  if (page.dirty) ForgetDirty(page);
  if (page.in_lru) LruRemove(frame);
  page = Page{};
  free.push_back(frame);
}

PageCache::PageMap::iterator PageCache::Shard::Drop(FilePages& file, PageMap::iterator it) {
  Free(it->second);
  return file.pages.erase(it);  // a btree's erase invalidates other iterators
}

void PageCache::Shard::EraseIfEmpty(uint64_t ino) {
  const auto file = files.find(ino);
  if (file != files.end() && file->second.pages.empty()) files.erase(file);
}

void PageCache::Shard::LruAppend(Frame frame) {
  Page& page = PageOf(frame);
  page.in_lru = true;
  page.lru_prev = lru_newest;
  page.lru_next = kNoFrame;
  if (lru_newest != kNoFrame) {
    PageOf(lru_newest).lru_next = frame;
  } else {
    lru_oldest = frame;
  }
  lru_newest = frame;
}

void PageCache::Shard::LruRemove(Frame frame) {
  Page& page = PageOf(frame);
  if (page.lru_prev != kNoFrame) {
    PageOf(page.lru_prev).lru_next = page.lru_next;
  } else {
    lru_oldest = page.lru_next;
  }
  if (page.lru_next != kNoFrame) {
    PageOf(page.lru_next).lru_prev = page.lru_prev;
  } else {
    lru_newest = page.lru_prev;
  }
  page.in_lru = false;
  page.lru_prev = page.lru_next = kNoFrame;
}

void PageCache::Shard::Touch(Frame frame) {
  if (!PageOf(frame).in_lru || lru_newest == frame) return;
  LruRemove(frame);
  LruAppend(frame);
}

void PageCache::Shard::MarkDirty(Frame frame) {
  Page& page = PageOf(frame);
  if (page.dirty) return;
  if (page.in_lru) LruRemove(frame);
  page.dirty = true;
  ++dirty_pages;
  total_dirty->fetch_add(1);
  FilePages& owner = files.at(page.owner);
  if (owner.dirty_pages++ == 0) {
    owner.first_dirtied = absl::Now();
    dirty_files.insert(page.owner);
  }
}

void PageCache::Shard::MarkClean(Frame frame) {
  Page& page = PageOf(frame);
  if (!page.dirty) return;
  ForgetDirty(page);
  LruAppend(frame);
}

void PageCache::Shard::ForgetDirty(Page& page) {
  page.dirty = false;
  --dirty_pages;
  total_dirty->fetch_sub(1);
  if (--files.at(page.owner).dirty_pages == 0) dirty_files.erase(page.owner);
}

}  // namespace cudafs
