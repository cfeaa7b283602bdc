#include "alloc/arena.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace cudafs {

Arena::Arena(Device* device, uint64_t min_block)
    : device_(device),
      min_block_(min_block),
      capacity_(device->arena_size() / min_block * min_block),
      granule_(device->granule_size()),
      allocator_(device->arena_size(), min_block) {}

Arena::~Arena() {
  absl::MutexLock lock(&mu_);
  for (const auto& [granule, users] : granule_users_) {
    device_->Decommit(granule * granule_, granule_).IgnoreError();
  }
}

absl::StatusOr<Block> Arena::Allocate(uint64_t size) {
  absl::MutexLock lock(&mu_);
  std::optional<uint64_t> offset = allocator_.Allocate(size);
  if (!offset) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("no free block of %d bytes in the arena", size));
  }
  Block block{*offset, size};
  if (absl::Status status = Reference(block); !status.ok()) {
    allocator_.Free(block.offset, block.size);
    return status;
  }
  return block;
}

void Arena::Free(Block block) {
  absl::MutexLock lock(&mu_);
  Unreference(block);
  allocator_.Free(block.offset, block.size);
}

std::pair<Block, Block> Arena::Split(Block block) {
  const Block lower{block.offset, block.size / 2};
  const Block upper{block.offset + block.size / 2, block.size / 2};
  absl::MutexLock lock(&mu_);
  allocator_.Split(block.offset, block.size);
  // Halves of a block no larger than a granule share its granule, which now
  // has one more block keeping it committed.
  if (block.size <= granule_) ++granule_users_[block.offset / granule_];
  return {lower, upper};
}

absl::Status Arena::Reference(Block block) {
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    auto [it, inserted] = granule_users_.try_emplace(g, 0);
    if (inserted) {
      if (absl::Status status = device_->Commit(g * granule_, granule_); !status.ok()) {
        granule_users_.erase(it);
        // Roll back the granules this call already took.
        if (g > first) Unreference(Block{first * granule_, (g - first) * granule_});
        return status;
      }
    }
    ++it->second;
  }
  return absl::OkStatus();
}

void Arena::Unreference(Block block) {
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    auto it = granule_users_.find(g);
    if (--it->second == 0) {
      granule_users_.erase(it);
      // A failed decommit only leaks physical memory until unmount; the
      // granule is recommitted (a no-op for most devices) on next use.
      device_->Decommit(g * granule_, granule_).IgnoreError();
    }
  }
}

uint64_t Arena::LargestFree() const {
  absl::MutexLock lock(&mu_);
  return allocator_.Stats().largest_free;
}

ArenaStats Arena::Stats() const {
  absl::MutexLock lock(&mu_);
  return ArenaStats{allocator_.Stats(), granule_users_.size() * granule_};
}

}  // namespace cudafs
