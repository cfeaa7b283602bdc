#include "alloc/storage/buddy_allocator.h"

#include <bit>
#include <cassert>

namespace cudafs {

BuddyAllocator::BuddyAllocator(uint64_t range_size, uint64_t min_block)
    : min_block_(min_block), capacity_(range_size / min_block * min_block) {
  assert(std::has_single_bit(min_block));
  const uint64_t blocks = capacity_ / min_block_;
  const int orders = blocks == 0 ? 1 : std::bit_width(blocks);
  free_.resize(orders);
  // Binary decomposition, largest first: each piece's offset is a multiple
  // of its size because every earlier piece was larger.
  uint64_t offset = 0;
  for (int order = orders - 1; order >= 0; --order) {
    if (blocks & (uint64_t{1} << order)) {
      free_[order].insert(offset);
      offset += SizeOf(order);
    }
  }
}

int BuddyAllocator::OrderOf(uint64_t size) const {
  return std::countr_zero(size) - std::countr_zero(min_block_);
}

uint64_t BuddyAllocator::max_block() const {
  return capacity_ == 0 ? 0 : SizeOf(static_cast<int>(free_.size()) - 1);
}

std::optional<uint64_t> BuddyAllocator::Allocate(uint64_t size) {
  // Lowest offset first keeps allocations packed at the start of the arena,
  // so whole granules at the end stay free and can be decommitted.
  return AllocateWhere(size, [](uint64_t) { return true; });
}

std::optional<uint64_t> BuddyAllocator::AllocateWhere(
    uint64_t size, absl::FunctionRef<bool(uint64_t offset)> accept) {
  if (size < min_block_ || !std::has_single_bit(size)) return std::nullopt;
  const int want = OrderOf(size);
  int candidates = 0;
  for (int order = want; order < static_cast<int>(free_.size()); ++order) {
    for (auto it = free_[order].begin(); it != free_[order].end(); ++it) {
      for (uint64_t offset = *it; offset < *it + SizeOf(order); offset += size) {
        if (++candidates > kMaxCandidates) return std::nullopt;
        if (accept(offset)) return Take(it, order, offset, want);
      }
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> BuddyAllocator::AllocateWithin(uint64_t size, uint64_t from, uint64_t to) {
  if (size < min_block_ || !std::has_single_bit(size)) return std::nullopt;
  const int want = OrderOf(size);
  for (int order = want; order < static_cast<int>(free_.size()); ++order) {
    const auto it = free_[order].lower_bound(from);
    if (it != free_[order].end() && *it + SizeOf(order) <= to) return Take(it, order, *it, want);
  }
  return std::nullopt;
}

bool BuddyAllocator::AllocateAt(uint64_t offset, uint64_t size) {
  if (size < min_block_ || !std::has_single_bit(size) || offset % size != 0) return false;
  const int want = OrderOf(size);
  for (int order = want; order < static_cast<int>(free_.size()); ++order) {
    const auto it = free_[order].find(offset & ~(SizeOf(order) - 1));
    if (it != free_[order].end()) {
      Take(it, order, offset, want);
      return true;
    }
  }
  return false;
}

uint64_t BuddyAllocator::Take(absl::btree_set<uint64_t>::iterator free, int order, uint64_t offset,
                              int want) {
  uint64_t start = *free;
  free_[order].erase(free);
  used_ += SizeOf(want);
  ++allocated_blocks_;
  while (order > want) {
    --order;
    const uint64_t half = SizeOf(order);
    if (offset >= start + half) {  // the lower half stays free
      free_[order].insert(start);
      start += half;
    } else {  // the upper half does
      free_[order].insert(start + half);
    }
  }
  return offset;
}

void BuddyAllocator::Free(uint64_t offset, uint64_t size) {
  int order = OrderOf(size);
  used_ -= size;
  --allocated_blocks_;
  while (order + 1 < static_cast<int>(free_.size())) {
    const uint64_t buddy = offset ^ SizeOf(order);
    if (buddy + SizeOf(order) > capacity_) break;  // outside the range
    auto it = free_[order].find(buddy);
    if (it == free_[order].end()) break;
    free_[order].erase(it);
    offset = std::min(offset, buddy);
    ++order;
  }
  free_[order].insert(offset);
}

void BuddyAllocator::Split(uint64_t /*offset*/, uint64_t /*size*/) {
  // Free lists hold only free blocks, so the halves need no bookkeeping of
  // their own: one more block is allocated, the bytes in use are the same.
  ++allocated_blocks_;
}

BuddyStats BuddyAllocator::Stats() const {
  BuddyStats stats;
  stats.capacity = capacity_;
  stats.used = used_;
  stats.free = capacity_ - used_;
  stats.allocated_blocks = allocated_blocks_;
  for (int order = static_cast<int>(free_.size()) - 1; order >= 0; --order) {
    if (!free_[order].empty()) {
      stats.largest_free = SizeOf(order);
      break;
    }
  }
  if (stats.free > 0) {
    stats.fragmentation =
        1.0 - static_cast<double>(stats.largest_free) / static_cast<double>(stats.free);
  }
  return stats;
}

}  // namespace cudafs
