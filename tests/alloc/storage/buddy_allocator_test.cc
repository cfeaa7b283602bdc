#include "alloc/storage/buddy_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;

void ExpectSameStats(const BuddyStats& actual, const BuddyStats& expected) {
  EXPECT_EQ(actual.capacity, expected.capacity);
  EXPECT_EQ(actual.used, expected.used);
  EXPECT_EQ(actual.free, expected.free);
  EXPECT_EQ(actual.largest_free, expected.largest_free);
  EXPECT_EQ(actual.allocated_blocks, expected.allocated_blocks);
  EXPECT_DOUBLE_EQ(actual.fragmentation, expected.fragmentation);
}

double Fragmentation(uint64_t largest_free, uint64_t free) {
  return free == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free) / static_cast<double>(free);
}

// Which min_block units of the range are allocated, kept independently of the
// allocator so that every answer it gives can be checked by brute force.
class SpaceModel {
 public:
  SpaceModel(uint64_t capacity, uint64_t min_block)
      : min_block_(min_block), used_(capacity / min_block, false) {}

  uint64_t units() const { return used_.size(); }
  uint64_t used_bytes() const { return used_units_ * min_block_; }
  uint64_t free_bytes() const { return (units() - used_units_) * min_block_; }

  bool IsFree(uint64_t offset, uint64_t size) const {
    for (uint64_t unit = offset / min_block_; unit < (offset + size) / min_block_; ++unit) {
      if (used_[unit]) return false;
    }
    return true;
  }

  void Mark(uint64_t offset, uint64_t size, bool used) {
    for (uint64_t unit = offset / min_block_; unit < (offset + size) / min_block_; ++unit) {
      used_[unit] = used;
    }
    const uint64_t units = size / min_block_;
    used_units_ = used ? used_units_ + units : used_units_ - units;
  }

  // Whether some block of `size` bytes, aligned to `size` and inside the
  // range, is entirely free.
  bool HasFreeAlignedBlock(uint64_t size) const {
    for (uint64_t offset = 0; offset + size <= units() * min_block_; offset += size) {
      if (IsFree(offset, size)) return true;
    }
    return false;
  }

  // The largest power-of-two block (up to max_block) that HasFreeAlignedBlock.
  uint64_t LargestFreeAlignedBlock(uint64_t max_block) const {
    for (uint64_t size = max_block; size >= min_block_; size /= 2) {
      if (HasFreeAlignedBlock(size)) return size;
    }
    return 0;
  }

 private:
  const uint64_t min_block_;
  std::vector<bool> used_;
  uint64_t used_units_ = 0;
};

TEST(BuddyAllocatorTest, RangeIsRoundedDownToMinBlock) {
  // 10 whole units and a partial one: the partial unit is not managed.
  BuddyAllocator allocator(10 * kMinBlock + 100, kMinBlock);
  const BuddyStats stats = allocator.Stats();
  EXPECT_EQ(stats.capacity, 10 * kMinBlock);
  EXPECT_EQ(stats.used, 0u);
  EXPECT_EQ(stats.free, 10 * kMinBlock);
  EXPECT_EQ(stats.allocated_blocks, 0u);
  // 10 = 8 + 2: the largest piece of the decomposition is 8 units.
  EXPECT_EQ(stats.largest_free, 8 * kMinBlock);
  EXPECT_EQ(allocator.max_block(), 8 * kMinBlock);
  EXPECT_DOUBLE_EQ(stats.fragmentation, Fragmentation(8 * kMinBlock, 10 * kMinBlock));
  EXPECT_EQ(allocator.min_block(), kMinBlock);
}

TEST(BuddyAllocatorTest, RangeSmallerThanMinBlockManagesNothing) {
  BuddyAllocator allocator(kMinBlock - 1, kMinBlock);
  const BuddyStats stats = allocator.Stats();
  EXPECT_EQ(stats.capacity, 0u);
  EXPECT_EQ(stats.free, 0u);
  EXPECT_EQ(stats.largest_free, 0u);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.0);
  EXPECT_EQ(allocator.max_block(), 0u);
  EXPECT_EQ(allocator.Allocate(kMinBlock), std::nullopt);
}

TEST(BuddyAllocatorTest, OnlyPowerOfTwoSizesFromMinToMaxBlockAreHandedOut) {
  BuddyAllocator allocator(64 * kMinBlock, 2 * kMinBlock);
  const BuddyStats initial = allocator.Stats();
  // Sizes are not rounded up: anything but an exact block size is refused.
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, kMinBlock, 3 * kMinBlock, 2 * kMinBlock + 1,
                        6 * kMinBlock, 128 * kMinBlock, 127 * kMinBlock}) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    EXPECT_EQ(allocator.Allocate(size), std::nullopt);
    ExpectSameStats(allocator.Stats(), initial);
  }
  for (uint64_t size = 2 * kMinBlock; size <= allocator.max_block(); size *= 2) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    std::optional<uint64_t> offset = allocator.Allocate(size);
    ASSERT_TRUE(offset.has_value());
    EXPECT_EQ(allocator.Stats().used, size);
    allocator.Free(*offset, size);
    ExpectSameStats(allocator.Stats(), initial);
  }
}

TEST(BuddyAllocatorTest, MinBlockOf4KiBHandsOut4KiBBlocks) {
  constexpr uint64_t kUnits = 256;
  BuddyAllocator allocator(kUnits * 4096, 4096);
  SpaceModel model(kUnits * 4096, 4096);
  for (uint64_t i = 0; i < kUnits; ++i) {
    std::optional<uint64_t> offset = allocator.Allocate(4096);
    ASSERT_TRUE(offset.has_value()) << "allocation " << i;
    EXPECT_EQ(*offset % 4096, 0u);
    ASSERT_TRUE(model.IsFree(*offset, 4096)) << "handed out twice: " << *offset;
    model.Mark(*offset, 4096, true);
  }
  EXPECT_EQ(allocator.Allocate(4096), std::nullopt);
  EXPECT_EQ(allocator.Stats().used, kUnits * 4096);
  EXPECT_EQ(allocator.Stats().allocated_blocks, kUnits);
}

TEST(BuddyAllocatorTest, BlocksAreAlignedToTheirSizeAndDoNotOverlap) {
  constexpr uint64_t kCapacity = 1024 * kMinBlock;
  BuddyAllocator allocator(kCapacity, kMinBlock);
  SpaceModel model(kCapacity, kMinBlock);
  // Mixed sizes, small first, so that large blocks must skip split remains.
  const std::vector<uint64_t> units = {1, 4, 2, 1, 64, 8, 1, 128, 16, 2, 32, 1, 256, 4};
  for (uint64_t n : units) {
    const uint64_t size = n * kMinBlock;
    std::optional<uint64_t> offset = allocator.Allocate(size);
    ASSERT_TRUE(offset.has_value()) << "size " << size;
    EXPECT_EQ(*offset % size, 0u) << "size " << size;
    EXPECT_LE(*offset + size, kCapacity);
    EXPECT_TRUE(model.IsFree(*offset, size)) << "overlap at " << *offset;
    model.Mark(*offset, size, true);
  }
  EXPECT_EQ(allocator.Stats().used, model.used_bytes());
}

TEST(BuddyAllocatorTest, FreeingEverythingCoalescesBackToOneBlock) {
  constexpr uint64_t kUnits = 64;
  BuddyAllocator allocator(kUnits * kMinBlock, kMinBlock);
  const BuddyStats initial = allocator.Stats();
  ASSERT_EQ(initial.largest_free, kUnits * kMinBlock);

  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < kUnits; ++i) {
    std::optional<uint64_t> offset = allocator.Allocate(kMinBlock);
    ASSERT_TRUE(offset.has_value());
    offsets.push_back(*offset);
  }
  BuddyStats full = allocator.Stats();
  EXPECT_EQ(full.free, 0u);
  EXPECT_EQ(full.largest_free, 0u);
  EXPECT_DOUBLE_EQ(full.fragmentation, 0.0);
  EXPECT_EQ(allocator.Allocate(kMinBlock), std::nullopt);

  // Free in an order where buddies are rarely freed back to back.
  std::mt19937_64 rng(1);
  std::shuffle(offsets.begin(), offsets.end(), rng);
  for (uint64_t offset : offsets) allocator.Free(offset, kMinBlock);
  ExpectSameStats(allocator.Stats(), initial);

  std::optional<uint64_t> whole = allocator.Allocate(kUnits * kMinBlock);
  ASSERT_TRUE(whole.has_value()) << "free space did not coalesce";
  EXPECT_EQ(*whole, 0u);
}

TEST(BuddyAllocatorTest, NonPowerOfTwoRangeIsUsedToTheLastByte) {
  // 13 = 8 + 4 + 1 units: the only aligned blocks are inside those pieces.
  constexpr uint64_t kUnits = 13;
  BuddyAllocator allocator(kUnits * kMinBlock, kMinBlock);
  const BuddyStats initial = allocator.Stats();
  EXPECT_EQ(initial.capacity, kUnits * kMinBlock);
  EXPECT_EQ(initial.largest_free, 8 * kMinBlock);
  EXPECT_EQ(allocator.max_block(), 8 * kMinBlock);

  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < kUnits; ++i) {
    std::optional<uint64_t> offset = allocator.Allocate(kMinBlock);
    ASSERT_TRUE(offset.has_value()) << "allocation " << i;
    EXPECT_LT(*offset, kUnits * kMinBlock);
    offsets.push_back(*offset);
  }
  EXPECT_EQ(allocator.Allocate(kMinBlock), std::nullopt);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(std::adjacent_find(offsets.begin(), offsets.end()), offsets.end());

  std::reverse(offsets.begin(), offsets.end());  // the lone last unit first
  for (uint64_t offset : offsets) allocator.Free(offset, kMinBlock);
  ExpectSameStats(allocator.Stats(), initial);

  // Had the last unit merged with its buddy beyond the range, a 2-unit block
  // would stick out of it. Exactly 6 fit, in [0, 12) units.
  std::vector<uint64_t> pairs;
  for (int i = 0; i < 6; ++i) {
    std::optional<uint64_t> offset = allocator.Allocate(2 * kMinBlock);
    ASSERT_TRUE(offset.has_value()) << "pair " << i;
    EXPECT_LE(*offset + 2 * kMinBlock, 12 * kMinBlock);
    pairs.push_back(*offset);
  }
  EXPECT_EQ(allocator.Allocate(2 * kMinBlock), std::nullopt);
  for (uint64_t offset : pairs) allocator.Free(offset, 2 * kMinBlock);
  ExpectSameStats(allocator.Stats(), initial);

  // The decomposition's pieces come back whole.
  EXPECT_EQ(allocator.Allocate(8 * kMinBlock), std::optional<uint64_t>(0));
  EXPECT_EQ(allocator.Allocate(4 * kMinBlock), std::optional<uint64_t>(8 * kMinBlock));
  EXPECT_EQ(allocator.Allocate(kMinBlock), std::optional<uint64_t>(12 * kMinBlock));
  EXPECT_EQ(allocator.Stats().free, 0u);
}

TEST(BuddyAllocatorTest, ExhaustionReturnsNulloptAndChangesNothing) {
  constexpr uint64_t kUnits = 32;
  BuddyAllocator allocator(kUnits * kMinBlock, kMinBlock);
  // Take every unit, then give back every other one: half the space is free
  // but no two free units are buddies.
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < kUnits; ++i) offsets.push_back(*allocator.Allocate(kMinBlock));
  std::vector<uint64_t> kept;
  for (uint64_t offset : offsets) {
    if ((offset / kMinBlock) % 2 == 0) {
      allocator.Free(offset, kMinBlock);
    } else {
      kept.push_back(offset);
    }
  }
  const BuddyStats before = allocator.Stats();
  EXPECT_EQ(before.free, kUnits / 2 * kMinBlock);
  EXPECT_EQ(before.largest_free, kMinBlock);
  EXPECT_DOUBLE_EQ(before.fragmentation, Fragmentation(kMinBlock, kUnits / 2 * kMinBlock));

  for (uint64_t size = 2 * kMinBlock; size <= kUnits * kMinBlock; size *= 2) {
    EXPECT_EQ(allocator.Allocate(size), std::nullopt) << "size " << size;
    ExpectSameStats(allocator.Stats(), before);
  }
  // The failed calls left the free lists intact: every free unit is still
  // there, and nothing else.
  for (uint64_t i = 0; i < kUnits / 2; ++i) {
    std::optional<uint64_t> offset = allocator.Allocate(kMinBlock);
    ASSERT_TRUE(offset.has_value());
    EXPECT_EQ((*offset / kMinBlock) % 2, 0u);
  }
  EXPECT_EQ(allocator.Allocate(kMinBlock), std::nullopt);
}

TEST(BuddyAllocatorTest, StatsFollowASequence) {
  constexpr uint64_t kUnits = 16;
  constexpr uint64_t kCapacity = kUnits * kMinBlock;
  BuddyAllocator allocator(kCapacity, kMinBlock);

  const uint64_t a = *allocator.Allocate(kMinBlock);  // splits 16 into 8+4+2+1+1
  BuddyStats stats = allocator.Stats();
  EXPECT_EQ(stats.used, kMinBlock);
  EXPECT_EQ(stats.free, kCapacity - kMinBlock);
  EXPECT_EQ(stats.allocated_blocks, 1u);
  EXPECT_EQ(stats.largest_free, 8 * kMinBlock);
  EXPECT_DOUBLE_EQ(stats.fragmentation, Fragmentation(8 * kMinBlock, 15 * kMinBlock));

  const uint64_t b = *allocator.Allocate(8 * kMinBlock);  // the half without `a`
  EXPECT_NE(a / (8 * kMinBlock), b / (8 * kMinBlock));
  stats = allocator.Stats();
  EXPECT_EQ(stats.used, 9 * kMinBlock);
  EXPECT_EQ(stats.free, 7 * kMinBlock);
  EXPECT_EQ(stats.allocated_blocks, 2u);
  EXPECT_EQ(stats.largest_free, 4 * kMinBlock);
  EXPECT_DOUBLE_EQ(stats.fragmentation, Fragmentation(4 * kMinBlock, 7 * kMinBlock));

  allocator.Free(a, kMinBlock);  // `a`'s half is whole again
  stats = allocator.Stats();
  EXPECT_EQ(stats.used, 8 * kMinBlock);
  EXPECT_EQ(stats.free, 8 * kMinBlock);
  EXPECT_EQ(stats.allocated_blocks, 1u);
  EXPECT_EQ(stats.largest_free, 8 * kMinBlock);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.0);

  allocator.Free(b, 8 * kMinBlock);
  stats = allocator.Stats();
  EXPECT_EQ(stats.used, 0u);
  EXPECT_EQ(stats.free, kCapacity);
  EXPECT_EQ(stats.allocated_blocks, 0u);
  EXPECT_EQ(stats.largest_free, kCapacity);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.0);
}

class BuddyAllocatorRandomTest : public ::testing::TestWithParam<uint64_t> {};

// Random allocations and frees, every answer checked against SpaceModel.
TEST_P(BuddyAllocatorRandomTest, AgreesWithBruteForceModel) {
  const uint64_t units = GetParam();
  const uint64_t capacity = units * kMinBlock;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);

  BuddyAllocator allocator(capacity, kMinBlock);
  SpaceModel model(capacity, kMinBlock);
  const uint64_t max_block = allocator.max_block();
  ASSERT_EQ(max_block, std::bit_floor(capacity));
  const int max_order = std::countr_zero(max_block / kMinBlock);

  // Small blocks are common and large ones rare, like file extents.
  std::geometric_distribution<int> order_of(0.35);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, size
  double alloc_probability = 0.5;
  int failures = 0;
  constexpr int kOperations = 100'000;
  for (int op = 0; op < kOperations; ++op) {
    // Phases of filling and draining visit every fill level.
    if (op % 5000 == 0) {
      alloc_probability = std::uniform_real_distribution<double>(0.2, 0.9)(rng);
    }
    const bool allocate = live.empty() || std::bernoulli_distribution(alloc_probability)(rng);
    if (allocate) {
      const uint64_t size = kMinBlock << std::min(order_of(rng), max_order);
      std::optional<uint64_t> offset = allocator.Allocate(size);
      if (offset) {
        ASSERT_EQ(*offset % size, 0u) << "op " << op << ": misaligned block of " << size;
        ASSERT_LE(*offset + size, capacity) << "op " << op << ": block outside the range";
        ASSERT_TRUE(model.IsFree(*offset, size))
            << "op " << op << ": block [" << *offset << ", +" << size << ") overlaps a live one";
        model.Mark(*offset, size, true);
        live.emplace_back(*offset, size);
      } else {
        ++failures;
        ASSERT_FALSE(model.HasFreeAlignedBlock(size))
            << "op " << op << ": refused " << size << " bytes though an aligned block is free";
      }
    } else {
      const size_t index = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      const auto [offset, size] = live[index];
      live[index] = live.back();
      live.pop_back();
      allocator.Free(offset, size);
      model.Mark(offset, size, false);
    }

    const BuddyStats stats = allocator.Stats();
    ASSERT_EQ(stats.capacity, capacity);
    ASSERT_EQ(stats.used, model.used_bytes()) << "op " << op;
    ASSERT_EQ(stats.used + stats.free, capacity) << "op " << op;
    ASSERT_EQ(stats.allocated_blocks, live.size()) << "op " << op;
    const uint64_t largest = model.LargestFreeAlignedBlock(max_block);
    ASSERT_EQ(stats.largest_free, largest) << "op " << op;
    ASSERT_DOUBLE_EQ(stats.fragmentation, Fragmentation(largest, model.free_bytes()))
        << "op " << op;
  }
  // The run must have reached full arenas to have tested refusals.
  EXPECT_GT(failures, 0);

  for (const auto& [offset, size] : live) allocator.Free(offset, size);
  const BuddyStats stats = allocator.Stats();
  EXPECT_EQ(stats.used, 0u);
  EXPECT_EQ(stats.largest_free, max_block);
  EXPECT_EQ(allocator.Allocate(max_block), std::optional<uint64_t>(0));
}

// A power of two, and odd sizes whose decomposition has many pieces.
INSTANTIATE_TEST_SUITE_P(ArenaSizes, BuddyAllocatorRandomTest,
                         ::testing::Values(uint64_t{1024}, uint64_t{1013}, uint64_t{777}),
                         [](const ::testing::TestParamInfo<uint64_t>& info) {
                           return absl::StrCat(info.param, "Units");
                         });

TEST(BuddyAllocatorTest, SplitHalvesAreFreedOnTheirOwnAndCoalesce) {
  BuddyAllocator allocator(16 * kMinBlock, kMinBlock);
  const std::optional<uint64_t> block = allocator.Allocate(8 * kMinBlock);
  ASSERT_TRUE(block.has_value());
  allocator.Split(*block, 8 * kMinBlock);
  EXPECT_EQ(allocator.Stats().allocated_blocks, 2u);
  EXPECT_EQ(allocator.Stats().used, 8 * kMinBlock);
  // Giving back the upper half makes exactly it allocatable again.
  allocator.Free(*block + 4 * kMinBlock, 4 * kMinBlock);
  EXPECT_EQ(allocator.Stats().used, 4 * kMinBlock);
  EXPECT_EQ(allocator.Stats().largest_free, 8 * kMinBlock);  // the other half of the range
  const std::optional<uint64_t> again = allocator.Allocate(4 * kMinBlock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *block + 4 * kMinBlock);
  allocator.Free(*again, 4 * kMinBlock);
  allocator.Free(*block, 4 * kMinBlock);
  const BuddyStats stats = allocator.Stats();
  EXPECT_EQ(stats.used, 0u);
  EXPECT_EQ(stats.allocated_blocks, 0u);
  EXPECT_EQ(stats.largest_free, 16 * kMinBlock) << "halves did not coalesce";
}

// AllocateWhere passes over blocks the caller refuses, carving the one it
// takes out of a larger free block; the rest stays free and coalesces.
TEST(BuddyAllocatorTest, AllocateWherePassesOverRefusedBlocks) {
  BuddyAllocator allocator(64 * 4096, 4096);
  const std::optional<uint64_t> low = allocator.Allocate(4096);
  ASSERT_EQ(low, 0u);
  // 8 KiB blocks: the free ones start at 8 KiB; refuse those below 40 KiB.
  const std::optional<uint64_t> taken =
      allocator.AllocateWhere(8192, [](uint64_t offset) { return offset >= 40 * 1024; });
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken, 40 * 1024u);
  EXPECT_EQ(allocator.Stats().used, 4096u + 8192u);
  // What lies around it is still handed out, and all of it coalesces back.
  const std::optional<uint64_t> next = allocator.Allocate(8192);
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 8192u);
  EXPECT_FALSE(allocator.AllocateWhere(4096, [](uint64_t) { return false; }));
  allocator.Free(*next, 8192);
  allocator.Free(*taken, 8192);
  allocator.Free(*low, 4096);
  EXPECT_EQ(allocator.Stats().largest_free, 64 * 4096u);
  EXPECT_EQ(allocator.Stats().used, 0u);
}

// AllocateWithin takes the smallest free block lying wholly in the range,
// never one reaching past it, and carves the block from its start.
TEST(BuddyAllocatorTest, AllocateWithinTakesTheSmallestFreeBlockInTheRange) {
  constexpr uint64_t K = 1024;
  BuddyAllocator allocator(64 * 4 * K, 4 * K);
  ASSERT_EQ(allocator.Allocate(4 * K), 0u);
  // Free now: 4K@4K, 8K@8K, 16K@16K, 32K@32K, 64K@64K, 128K@128K.
  EXPECT_EQ(allocator.AllocateWithin(4 * K, 32 * K, 64 * K), 32 * K);
  EXPECT_EQ(allocator.AllocateWithin(4 * K, 32 * K, 64 * K), 36 * K) << "the 4K its split left";
  EXPECT_EQ(allocator.AllocateWithin(16 * K, 32 * K, 40 * K), std::nullopt);
  EXPECT_EQ(allocator.AllocateWithin(4 * K, 0, 8 * K), 4 * K);
  EXPECT_EQ(allocator.AllocateWithin(4 * K, 0, 8 * K), std::nullopt) << "the range is full";
  EXPECT_EQ(allocator.AllocateWithin(64 * K, 0, 96 * K), std::nullopt)
      << "the free 64K block reaches past the range";
  EXPECT_EQ(allocator.AllocateWithin(64 * K, 0, 128 * K), 64 * K);
  EXPECT_EQ(allocator.AllocateWithin(3 * K, 0, 256 * K), std::nullopt) << "not a block size";
  EXPECT_EQ(allocator.Stats().used, 4 * 4 * K + 64 * K);
  EXPECT_EQ(allocator.Stats().allocated_blocks, 5u);
  for (const uint64_t offset : {0u, 4u, 32u, 36u}) allocator.Free(offset * K, 4 * K);
  allocator.Free(64 * K, 64 * K);
  EXPECT_EQ(allocator.Stats().largest_free, 256 * K) << "everything coalesced";
}

// AllocateAt takes exactly the block asked for, when all of it is free,
// checked against the model at random over a range that is no power of two.
TEST(BuddyAllocatorTest, AllocateAtTakesExactlyAFreeBlock) {
  const uint64_t capacity = 1000 * kMinBlock;
  BuddyAllocator allocator(capacity, kMinBlock);
  SpaceModel model(capacity, kMinBlock);
  std::mt19937 random(5);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t size = kMinBlock << (random() % 8);
    const uint64_t offset = (random() % (capacity / size + 1)) * size;
    const bool fits = offset + size <= capacity && model.IsFree(offset, size);
    ASSERT_EQ(allocator.AllocateAt(offset, size), fits) << offset << " +" << size;
    if (fits) {
      model.Mark(offset, size, true);
      live.emplace_back(offset, size);
    }
    if (!live.empty() && random() % 3 == 0) {
      const size_t victim = random() % live.size();
      allocator.Free(live[victim].first, live[victim].second);
      model.Mark(live[victim].first, live[victim].second, false);
      live.erase(live.begin() + victim);
    }
    ASSERT_EQ(allocator.Stats().used, model.used_bytes());
  }
  EXPECT_FALSE(allocator.AllocateAt(kMinBlock, 2 * kMinBlock)) << "misaligned";
  EXPECT_FALSE(allocator.AllocateAt(0, 3 * kMinBlock)) << "no power of two";
  EXPECT_FALSE(allocator.AllocateAt(0, kMinBlock / 2)) << "below min_block";
}

}  // namespace
}  // namespace cudafs
