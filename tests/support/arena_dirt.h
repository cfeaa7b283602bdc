// DirtyArena: leaves stale bytes in an arena's free space, so that tests can
// catch a block handed out without being written or zeroed.
#ifndef CUDAFS_TESTS_SUPPORT_ARENA_DIRT_H_
#define CUDAFS_TESTS_SUPPORT_ARENA_DIRT_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "alloc/storage/arena.h"

namespace cudafs {

// Fills every free byte of `arena` with `dirt` and frees it again, but for
// one min_block at the end of each granule, appended to `held` (the caller
// frees those), so that no granule is decommitted (which would zero it): a
// block handed out later shows `dirt` wherever nobody wrote or zeroed it.
inline void DirtyArena(Arena& arena, char dirt, std::vector<Block>* held) {
  const uint64_t min_block = arena.min_block();
  std::vector<Block> blocks;
  for (;;) {
    absl::StatusOr<Block> block = arena.Allocate(min_block);
    if (!block.ok()) {
      ASSERT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
      break;
    }
    blocks.push_back(*block);
  }
  const std::string bytes(min_block, dirt);
  std::vector<HostToDevice> copies;
  for (const Block& block : blocks) copies.push_back({block.offset, bytes.data(), block.size});
  ASSERT_TRUE(arena.device().Write(copies).ok());
  const uint64_t granule = arena.device().granule_size();
  for (const Block& block : blocks) {
    if (block.offset % granule == granule - min_block) {
      held->push_back(block);
    } else {
      arena.Free(block);
    }
  }
  ASSERT_EQ(arena.Stats().committed_bytes, arena.device().arena_size());
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_ARENA_DIRT_H_
