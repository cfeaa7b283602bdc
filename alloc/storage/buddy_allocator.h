// BuddyAllocator: hands out power-of-two blocks of an address range.
//
// It manages offsets only (no memory): the Arena puts device memory behind
// them. Blocks are between min_block and the largest power of two that fits
// in the range; a block of size S is always aligned to S, which lets files
// map extents without overlap (see alloc/storage/extent_map.h).
//
// The range need not be a power of two: it is covered by the aligned
// power-of-two blocks of its binary decomposition, and a block never
// coalesces with a buddy outside the range.
//
// Allocate and Free are O(log n). Not thread-safe: the Arena locks.
#ifndef CUDAFS_ALLOC_STORAGE_BUDDY_ALLOCATOR_H_
#define CUDAFS_ALLOC_STORAGE_BUDDY_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"

namespace cudafs {

struct BuddyStats {
  uint64_t capacity = 0;       // bytes managed (range rounded down to min_block)
  uint64_t used = 0;           // bytes in allocated blocks
  uint64_t free = 0;           // capacity - used
  uint64_t largest_free = 0;   // largest block Allocate can return now
  uint64_t allocated_blocks = 0;
  // 1 - largest_free / free: 0 when all free space is one block, near 1 when
  // free space is scattered in small pieces. 0 when nothing is free.
  double fragmentation = 0;
};

class BuddyAllocator {
 public:
  // min_block must be a power of two. range_size is rounded down to a
  // multiple of min_block.
  BuddyAllocator(uint64_t range_size, uint64_t min_block);

  BuddyAllocator(const BuddyAllocator&) = delete;
  BuddyAllocator& operator=(const BuddyAllocator&) = delete;

  // Returns the offset of a free block of exactly `size` bytes (a power of
  // two >= min_block), or nullopt when no such block is free.
  std::optional<uint64_t> Allocate(uint64_t size);

  // The same, for the first free block (from the smallest free blocks up,
  // each in address order) whose offset `accept` takes; nullopt when none
  // is among the first kMaxCandidates looked at.
  std::optional<uint64_t> AllocateWhere(uint64_t size,
                                        absl::FunctionRef<bool(uint64_t offset)> accept);
  static constexpr int kMaxCandidates = 4096;

  // The same, for the smallest free block of [from, to) that holds one of
  // `size` bytes (its lowest); nullopt when none does. Lets a caller pack
  // blocks into a range it chose (Arena::AllocateForCompaction).
  std::optional<uint64_t> AllocateWithin(uint64_t size, uint64_t from, uint64_t to);

  // Allocates exactly the block [offset, offset + size) (size a power of
  // two >= min_block, offset a multiple of it) if all of it is free; false
  // otherwise. Takes over blocks another allocator handed out (a
  // filesystem image, Arena::Claim).
  bool AllocateAt(uint64_t offset, uint64_t size);

  // Returns a block obtained from Allocate (or Split) with the same size.
  void Free(uint64_t offset, uint64_t size);

  // Turns the allocated block [offset, offset + size), size > min_block,
  // into two allocated halves, each of which is later freed on its own. Lets
  // a caller give back the unused upper half of a block it holds.
  void Split(uint64_t offset, uint64_t size);

  uint64_t min_block() const { return min_block_; }
  // The largest block size that could ever be allocated.
  uint64_t max_block() const;
  BuddyStats Stats() const;

 private:
  int OrderOf(uint64_t size) const;  // log2(size / min_block)
  // Hands out block `offset` of order `want` from free block `*free` of
  // order `order`, whose other parts stay free; returns `offset`.
  uint64_t Take(absl::btree_set<uint64_t>::iterator free, int order, uint64_t offset, int want);
  uint64_t SizeOf(int order) const { return min_block_ << order; }

  const uint64_t min_block_;
  const uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t allocated_blocks_ = 0;
  // free_[k] holds the offsets of free blocks of size min_block << k. Sorted
  // sets make removing a buddy O(log n).
  std::vector<absl::btree_set<uint64_t>> free_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_BUDDY_ALLOCATOR_H_
