// The arena over a device of several parts (a PooledDevice of host
// devices standing in for GPUs): blocks stay in one part, the capacity
// bounds the sum, and files are placed as docs/DESIGN.md (*Several GPUs*)
// says.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/extent_map.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kMaxExtent = 4 * kMiB;

class PlacementTest : public testing::Test {
 protected:
  // `parts` host devices of `part_size` each, every one behind a
  // FaultyDevice the test can turn on; the arena capped at `capacity`.
  void MakePool(size_t parts, uint64_t part_size, uint64_t capacity = UINT64_MAX) {
    std::vector<std::unique_ptr<Device>> members;
    for (size_t i = 0; i < parts; ++i) {
      auto faulty = std::make_unique<FaultyDevice>(HostDevice::Create(part_size).value());
      faulty_.push_back(faulty.get());
      members.push_back(std::move(faulty));
    }
    device_ = PooledDevice::Create(std::move(members)).value();
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock, capacity);
  }

  size_t PartOf(const Block& block) const {
    const std::vector<DevicePart> parts = device_->parts();
    for (size_t p = 0; p < parts.size(); ++p) {
      const DeviceRange& range = parts[p].range;
      if (block.offset >= range.offset && block.offset + block.size <= range.offset + range.length) {
        return p;
      }
    }
    ADD_FAILURE() << "block at " << block.offset << " lies in no one part";
    return parts.size();
  }

  std::vector<FaultyDevice*> faulty_;
  std::unique_ptr<PooledDevice> device_;
  std::unique_ptr<Arena> arena_;
};

TEST_F(PlacementTest, BlocksComeFromThePartAskedForWhileItHasRoom) {
  MakePool(2, 16 * kMiB);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Block> block = arena_->Allocate(4 * kMiB, 1);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(PartOf(*block), 1u);
  }
  // Part 1 is full: the next goes to part 0, and the emptiest part is 0.
  absl::StatusOr<Block> spill = arena_->Allocate(4 * kMiB, 1);
  ASSERT_TRUE(spill.ok()) << spill.status();
  EXPECT_EQ(PartOf(*spill), 0u);
  EXPECT_EQ(placement::Home(arena_->Places()), 0u);
  const ArenaStats stats = arena_->Stats();
  ASSERT_EQ(stats.parts.size(), 2u);
  EXPECT_EQ(stats.parts[0].used, 4 * kMiB);
  EXPECT_EQ(stats.parts[1].used, 16 * kMiB);
  EXPECT_EQ(stats.parts[1].committed_bytes, 16 * kMiB);
  EXPECT_EQ(stats.blocks.capacity, 32 * kMiB);
  EXPECT_EQ(stats.blocks.used, 20 * kMiB);
  EXPECT_EQ(stats.blocks.free, 12 * kMiB);
}

TEST_F(PlacementTest, TheCapacityBoundsTheSumOfTheParts) {
  MakePool(2, 16 * kMiB, /*capacity=*/20 * kMiB);
  EXPECT_EQ(arena_->capacity(), 20 * kMiB);
  std::vector<Block> held;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<Block> block = arena_->Allocate(4 * kMiB, i % 2);
    ASSERT_TRUE(block.ok()) << block.status();
    held.push_back(*block);
  }
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->Allocate(kMinBlock, 0).status()));
  EXPECT_EQ(arena_->Stats().blocks.largest_free, 0u);
  arena_->Free(held.back());
  EXPECT_EQ(arena_->Stats().blocks.largest_free, 4 * kMiB);
  EXPECT_TRUE(arena_->Allocate(4 * kMiB, 0).ok());
}

TEST_F(PlacementTest, APartThatCannotCommitLeavesTheBlockToAnother) {
  MakePool(2, 16 * kMiB);
  faulty_[0]->SetPlan({.probability = 1, .ops = kFaultCommit});
  absl::StatusOr<Block> block = arena_->Allocate(2 * kMiB, 0);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(PartOf(*block), 1u);
  faulty_[1]->SetPlan({.probability = 1, .ops = kFaultCommit});
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->Allocate(2 * kMiB, 0).status()));
}

TEST_F(PlacementTest, LargeFilesAreStripedSmallOnesStayWholeAtHome) {
  MakePool(2, 64 * kMiB);
  // A file written in order: its max_extent blocks go round the parts.
  const ExtentMap::Space space(arena_.get(), kMaxExtent);
  ExtentMap large(&space);
  const std::string chunk(kMiB, 'L');
  for (uint64_t at = 0; at < 32 * kMiB; at += kMiB) {
    ASSERT_TRUE(large.Write(at, chunk.data(), chunk.size()).ok());
  }
  ArenaStats stats = arena_->Stats();
  // 1+1+2 MiB of growth at home, then seven 4 MiB extents alternating.
  EXPECT_GE(stats.parts[0].used, 12 * kMiB);
  EXPECT_GE(stats.parts[1].used, 12 * kMiB);
  std::string back(32 * kMiB, '\0');
  ASSERT_TRUE(large.Read(0, back.size(), back.data()).ok());
  EXPECT_EQ(back, std::string(32 * kMiB, 'L'));

  // A small file made now lives whole in the emptiest part.
  const size_t emptiest = placement::Home(arena_->Places());
  const uint64_t before = arena_->Stats().parts[emptiest].used;
  ExtentMap small(&space);
  const std::string bytes(3 * kMiB, 's');
  ASSERT_TRUE(small.Write(0, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(arena_->Stats().parts[emptiest].used, before + small.allocated_bytes());
}

TEST_F(PlacementTest, AFailedPartFailsOnlyTheFilesWithBytesThere) {
  MakePool(2, 64 * kMiB);
  const ExtentMap::Space space(arena_.get(), kMaxExtent);
  ExtentMap on_zero(&space);  // home: part 0 (both empty)
  ASSERT_TRUE(on_zero.Write(0, "zero", 4).ok());
  ExtentMap on_one(&space);  // home: part 1, now the emptiest
  ASSERT_TRUE(on_one.Write(0, "one!", 4).ok());
  ASSERT_EQ(arena_->Stats().parts[0].used, arena_->Stats().parts[1].used);

  faulty_[1]->SetPlan({.probability = 1, .ops = kFaultRead | kFaultWrite | kFaultZero});
  char out[4];
  EXPECT_TRUE(absl::IsInternal(on_one.Read(0, 4, out)));
  ASSERT_TRUE(on_zero.Read(0, 4, out).ok());
  EXPECT_EQ(std::string(out, 4), "zero");
  EXPECT_TRUE(on_zero.Write(4, "more", 4).ok());
}

}  // namespace
}  // namespace cudafs
