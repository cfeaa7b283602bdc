// The arena over a real GPU's memory. Skips where the machine has no usable
// GPU (CI).
#include <memory>
#include <vector>

#include "alloc/devices/cuda_device.h"
#include "alloc/storage/arena.h"
#include "gtest/gtest.h"
#include "tests/support/free_vram.h"

namespace cudafs {
namespace {

// The arena over VRAM: memory follows blocks, not the arena's size.
TEST(CudaArenaTest, ArenaMemoryFollowsAllocatedBlocks) {
  absl::StatusOr<std::vector<int>> first = ResolveCudaDevices("");
  if (!first.ok()) GTEST_SKIP() << "no usable GPU: " << first.status().message();
  const int index = first->front();
  absl::StatusOr<std::unique_ptr<CudaDevice>> opened = CudaDevice::Create(index, 32 * kGiB);
  ASSERT_TRUE(opened.ok()) << opened.status();
  CudaDevice* device = opened->get();
  Arena arena(device, 4096);
  const uint64_t before = FreeVram(index);
  std::vector<Block> blocks;
  for (int i = 0; i < 256; ++i) {  // 1 GiB in 4 MiB blocks
    absl::StatusOr<Block> block = arena.Allocate(4 * kMiB);
    ASSERT_TRUE(block.ok()) << block.status();
    blocks.push_back(*block);
  }
  EXPECT_EQ(arena.Stats().committed_bytes, 1 * kGiB);
  EXPECT_GE(before - FreeVram(index), 1 * kGiB - 64 * kMiB);
  for (const Block& block : blocks) arena.Free(block);
  EXPECT_EQ(arena.Stats().committed_bytes, 0u);
  EXPECT_GE(FreeVram(index) + 64 * kMiB, before);
}

}  // namespace
}  // namespace cudafs
