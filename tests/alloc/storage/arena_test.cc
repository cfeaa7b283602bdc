#include "alloc/storage/arena.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/devices/spill_readiness.h"
#include "gtest/gtest.h"
#include "tests/support/random_pattern.h"
#include "tests/support/recording_device.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t kGranule = HostDevice::kGranule;

std::set<uint64_t> GranulesUnder(const std::vector<Block>& blocks) {
  std::set<uint64_t> granules;
  for (const Block& block : blocks) {
    for (uint64_t g = block.offset / kGranule; g <= (block.offset + block.size - 1) / kGranule;
         ++g) {
      granules.insert(g);
    }
  }
  return granules;
}

void ExpectSameBlockStats(const BuddyStats& actual, const BuddyStats& expected) {
  EXPECT_EQ(actual.used, expected.used);
  EXPECT_EQ(actual.free, expected.free);
  EXPECT_EQ(actual.largest_free, expected.largest_free);
  EXPECT_EQ(actual.allocated_blocks, expected.allocated_blocks);
}

class ArenaTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kGranules = 16;

  void SetUp() override {
    device_ = std::make_unique<RecordingDevice>(HostDevice::Create(kGranules * kGranule).value());
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
  }

  void TearDown() override {
    for (const Block& block : live_) arena_->Free(block);
    live_.clear();
    ExpectCommittedGranulesFollowLiveBlocks();
    arena_.reset();
    for (const std::string& violation : device_->violations()) ADD_FAILURE() << violation;
  }

  Block MustAllocate(uint64_t size) {
    absl::StatusOr<Block> block = arena_->Allocate(size);
    EXPECT_TRUE(block.ok()) << block.status();
    if (!block.ok()) return Block{};
    EXPECT_EQ(block->size, size);
    live_.push_back(*block);
    return *block;
  }

  void FreeLive(size_t index) {
    arena_->Free(live_[index]);
    live_.erase(live_.begin() + index);
  }

  // The promise: a granule is committed exactly while some live block
  // touches it, and the Arena's own accounting agrees with the device.
  void ExpectCommittedGranulesFollowLiveBlocks() {
    const std::set<uint64_t> expected = GranulesUnder(live_);
    EXPECT_EQ(device_->committed_granules(), expected);
    EXPECT_EQ(arena_->Stats().committed_bytes, expected.size() * kGranule);
  }

  std::unique_ptr<RecordingDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::vector<Block> live_;  // allocated and not yet freed, freed in TearDown
};

TEST_F(ArenaTest, ManagesTheWholeDeviceArena) {
  EXPECT_EQ(arena_->capacity(), device_->arena_size());
  EXPECT_EQ(arena_->min_block(), kMinBlock);
  EXPECT_EQ(&arena_->device(), device_.get());
  const ArenaStats stats = arena_->Stats();
  EXPECT_EQ(stats.blocks.capacity, device_->arena_size());
  EXPECT_EQ(stats.blocks.used, 0u);
  EXPECT_EQ(stats.committed_bytes, 0u) << "an empty arena must hold no memory";
  EXPECT_EQ(arena_->Stats().blocks.largest_free, stats.blocks.largest_free);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, kGranules * kGranule);
  EXPECT_TRUE(device_->committed_granules().empty());
}

// Issue 13: a mount's size= is its capacity to the min_block, even though
// the device rounds its arena up to a granule. Blocks past the capacity are
// never handed out (so never committed), whatever their size.
TEST(ArenaCapacityTest, CapacityBelowTheDeviceArenaIsAHardLimit) {
  // 2 granules + 12 KiB + 1 byte: rounded up to 2 granules + 16 KiB.
  const uint64_t asked = 2 * kGranule + 12 * 1024 + 1;
  const uint64_t capacity = 2 * kGranule + 16 * 1024;
  RecordingDevice device(HostDevice::Create(asked).value());
  ASSERT_EQ(device.arena_size(), 3 * kGranule);
  Arena arena(&device, kMinBlock, asked);
  EXPECT_EQ(arena.capacity(), capacity);
  EXPECT_EQ(arena.Stats().blocks.capacity, capacity);
  EXPECT_EQ(arena.Stats().blocks.free, capacity);
  EXPECT_EQ(arena.Stats().blocks.largest_free, 2 * kGranule);

  // Largest blocks first, down to min_block: exactly the capacity fits.
  std::vector<Block> blocks;
  uint64_t allocated = 0;
  for (uint64_t size = 4 * kGranule; size >= kMinBlock; size /= 2) {
    for (absl::StatusOr<Block> block = arena.Allocate(size); block.ok();
         block = arena.Allocate(size)) {
      EXPECT_LE(block->offset + block->size, capacity);
      blocks.push_back(*block);
      allocated += size;
    }
  }
  EXPECT_EQ(allocated, capacity);
  EXPECT_EQ(arena.Stats().blocks.free, 0u);
  EXPECT_EQ(arena.Stats().blocks.largest_free, 0u);
  EXPECT_TRUE(absl::IsResourceExhausted(arena.Allocate(kMinBlock).status()));
  EXPECT_EQ(device.committed_granules(), (std::set<uint64_t>{0, 1, 2}));
  for (const Block& block : blocks) arena.Free(block);
  EXPECT_TRUE(device.committed_granules().empty());
  EXPECT_EQ(arena.Stats().blocks.largest_free, 2 * kGranule);
}

TEST(ArenaCapacityTest, CapacityIsRoundedToMinBlockAndCappedAtTheDeviceArena) {
  RecordingDevice device(HostDevice::Create(kGranule).value());
  EXPECT_EQ(Arena(&device, kMinBlock, 4096).capacity(), 4096u);
  EXPECT_EQ(Arena(&device, kMinBlock, 12 * 1024).capacity(), 12 * 1024u);
  EXPECT_EQ(Arena(&device, kMinBlock, 5000).capacity(), 8192u);
  EXPECT_EQ(Arena(&device, 64 * 1024, 100 * 1024).capacity(), 128 * 1024u);
  EXPECT_EQ(Arena(&device, kMinBlock, 3 * kGranule).capacity(), kGranule);
  EXPECT_EQ(Arena(&device, kMinBlock).capacity(), kGranule) << "the default: the whole arena";
  Arena small(&device, kMinBlock, 12 * 1024);
  EXPECT_EQ(small.Stats().blocks.largest_free, 8 * 1024u);
  EXPECT_TRUE(absl::IsResourceExhausted(small.Allocate(16 * 1024).status()));
}

TEST_F(ArenaTest, FirstBlockInAGranuleCommitsIt) {
  const Block block = MustAllocate(kMinBlock);
  EXPECT_EQ(device_->committed_granules(), std::set<uint64_t>{block.offset / kGranule});
  EXPECT_EQ(arena_->Stats().committed_bytes, kGranule);
  EXPECT_EQ(arena_->Stats().blocks.used, kMinBlock);
}

TEST_F(ArenaTest, GranuleStaysCommittedUntilItsLastBlockIsFreed) {
  // 17 blocks in 16 granules: two of them share a granule.
  for (uint64_t i = 0; i <= kGranules; ++i) {
    MustAllocate(kMinBlock);
    ExpectCommittedGranulesFollowLiveBlocks();
  }
  // Each granule was committed once, however many blocks it got.
  EXPECT_EQ(device_->granules_committed(), GranulesUnder(live_).size());

  size_t first = 0, second = 0;
  for (size_t i = 0; i < live_.size() && second == 0; ++i) {
    for (size_t j = i + 1; j < live_.size(); ++j) {
      if (live_[i].offset / kGranule == live_[j].offset / kGranule) {
        first = i;
        second = j;
        break;
      }
    }
  }
  ASSERT_NE(second, 0u);
  const Block a = live_[first];
  const Block b = live_[second];
  const uint64_t shared = a.offset / kGranule;
  // Free everything else first.
  for (size_t i = live_.size(); i-- > 0;) {
    if (i != first && i != second) FreeLive(i);
  }
  ExpectCommittedGranulesFollowLiveBlocks();

  arena_->Free(a);
  live_.erase(live_.begin());  // only a and b are left, a first
  EXPECT_EQ(device_->committed_granules(), std::set<uint64_t>{shared});
  arena_->Free(b);
  live_.clear();
  EXPECT_TRUE(device_->committed_granules().empty());
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
}

// Asked to (the daemon does), the last granule to empty stays committed,
// one at a time, until ReleaseLingering: a file made and removed over and
// over alone in the arena commits its granule once, not each time.
TEST_F(ArenaTest, TheLastGranuleToEmptyLingersUntilReleased) {
  arena_->LingerEmptyGranules();
  for (int i = 0; i < 10; ++i) {
    const Block block = MustAllocate(kMinBlock);
    FreeLive(0);
    EXPECT_EQ(device_->committed_granules(), std::set<uint64_t>{block.offset / kGranule});
    EXPECT_EQ(arena_->Stats().committed_bytes, kGranule);
  }
  EXPECT_EQ(device_->granules_committed(), 1u);
  // Another granule emptied while one lingers goes at once.
  const Block a = MustAllocate(kMinBlock);
  while (MustAllocate(kGranule / 2).offset / kGranule == a.offset / kGranule) {
  }
  for (size_t i = live_.size(); i-- > 0;) FreeLive(i);
  EXPECT_EQ(device_->committed_granules().size(), 1u);
  // A lingering granule is nothing compaction moves or fills.
  EXPECT_TRUE(arena_->PlanCompaction(kGranules * kGranule).empty());
  arena_->ReleaseLingering();
  ExpectCommittedGranulesFollowLiveBlocks();
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
  // A block of a granule or more (another process may map it) never
  // leaves its granule lingering.
  MustAllocate(kGranule);
  FreeLive(0);
  ExpectCommittedGranulesFollowLiveBlocks();
  // Taken again after its release: committed afresh.
  MustAllocate(kMinBlock);
  ExpectCommittedGranulesFollowLiveBlocks();
  FreeLive(0);
  arena_->ReleaseLingering();
}

// A lingering granule a new block takes is its again: no longer kept, so
// it goes with that block, and a release meanwhile leaves it be.
TEST_F(ArenaTest, ALingeringGranuleTakenAgainIsNoLongerKept) {
  arena_->LingerEmptyGranules();
  MustAllocate(kMinBlock);
  FreeLive(0);
  MustAllocate(kMinBlock);
  arena_->ReleaseLingering();
  ExpectCommittedGranulesFollowLiveBlocks();
  const size_t commits = device_->granules_committed();
  MustAllocate(kMinBlock);
  EXPECT_EQ(device_->granules_committed(), commits);
  ExpectCommittedGranulesFollowLiveBlocks();
  FreeLive(1);
  FreeLive(0);
  arena_->ReleaseLingering();
}

TEST_F(ArenaTest, BlockLargerThanAGranuleCommitsEveryGranuleUnderIt) {
  const Block block = MustAllocate(4 * kGranule);
  std::set<uint64_t> expected;
  for (uint64_t g = 0; g < 4; ++g) expected.insert(block.offset / kGranule + g);
  EXPECT_EQ(device_->committed_granules(), expected);
  EXPECT_EQ(arena_->Stats().committed_bytes, 4 * kGranule);
  FreeLive(0);
  EXPECT_TRUE(device_->committed_granules().empty());
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
}

TEST_F(ArenaTest, FailedCommitRollsBackAndLeavesTheArenaAsItWas) {
  MustAllocate(kMinBlock);
  const ArenaStats before = arena_->Stats();
  const std::set<uint64_t> committed_before = device_->committed_granules();

  // Two granules can be had, the block needs four.
  device_->FailCommitsBeyond(2);
  absl::StatusOr<Block> block = arena_->Allocate(4 * kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
  EXPECT_EQ(device_->committed_granules(), committed_before) << "rollback incomplete";
  const ArenaStats after = arena_->Stats();
  ExpectSameBlockStats(after.blocks, before.blocks);
  EXPECT_EQ(after.committed_bytes, before.committed_bytes);

  // The block went back to the allocator: it can be had once memory can.
  device_->AllowCommits();
  MustAllocate(4 * kGranule);
  ExpectCommittedGranulesFollowLiveBlocks();
}

// A block over several fresh granules is one Commit, so that the device can
// back it with one physical allocation.
TEST_F(ArenaTest, ABlockOverSeveralGranulesIsCommittedInOneCall) {
  MustAllocate(8 * kGranule);
  EXPECT_EQ(device_->commit_calls(), 1);
  EXPECT_EQ(device_->granules_committed(), 8u);
  ExpectCommittedGranulesFollowLiveBlocks();
}

TEST_F(ArenaTest, FailedCommitOfASingleGranuleFailsTheAllocation) {
  device_->FailCommitsBeyond(0);
  absl::StatusOr<Block> block = arena_->Allocate(kMinBlock);
  EXPECT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
  EXPECT_TRUE(device_->committed_granules().empty());
  EXPECT_EQ(arena_->Stats().blocks.used, 0u);
  EXPECT_EQ(arena_->Stats().blocks.allocated_blocks, 0u);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, kGranules * kGranule);
}

TEST_F(ArenaTest, BlocksInCommittedGranulesNeedNoCommit) {
  MustAllocate(kMinBlock);
  const std::set<uint64_t> committed = device_->committed_granules();
  // With commits failing, whatever still succeeds must lie in granules that
  // are already committed; the first failure is ResourceExhausted and leaves
  // the arena's books as they were.
  device_->FailCommitsBeyond(0);
  bool refused = false;
  while (!refused) {
    const BuddyStats before = arena_->Stats().blocks;
    absl::StatusOr<Block> block = arena_->Allocate(kMinBlock);
    if (block.ok()) {
      live_.push_back(*block);
      ASSERT_TRUE(committed.contains(block->offset / kGranule));
    } else {
      refused = true;
      EXPECT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
      ExpectSameBlockStats(arena_->Stats().blocks, before);
    }
  }
  EXPECT_EQ(device_->committed_granules(), committed);
  device_->AllowCommits();
}

TEST_F(ArenaTest, ExhaustionIsResourceExhaustedAndChangesNothing) {
  MustAllocate(kGranules * kGranule);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, 0u);
  const ArenaStats before = arena_->Stats();
  EXPECT_EQ(before.blocks.free, 0u);
  for (uint64_t size = kMinBlock; size <= kGranules * kGranule; size *= 2) {
    absl::StatusOr<Block> block = arena_->Allocate(size);
    EXPECT_TRUE(absl::IsResourceExhausted(block.status())) << "size " << size;
  }
  const ArenaStats after = arena_->Stats();
  ExpectSameBlockStats(after.blocks, before.blocks);
  EXPECT_EQ(after.committed_bytes, before.committed_bytes);
  FreeLive(0);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, kGranules * kGranule);
}

TEST_F(ArenaTest, DataRoundTripsThroughBlocks) {
  const std::vector<uint64_t> sizes = {kMinBlock, 64 * 1024, kGranule, 4 * kGranule, 2 * kMinBlock};
  std::vector<std::vector<char>> contents;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Block block = MustAllocate(sizes[i]);
    contents.push_back(Pattern(block.size, static_cast<uint32_t>(i)));
    ASSERT_TRUE(
        arena_->device().Write({HostToDevice{block.offset, contents[i].data(), block.size}}).ok());
  }
  // Read every block back in one batch, after all writes: no block's bytes
  // landed in another's.
  std::vector<std::vector<char>> read_back;
  std::vector<DeviceToHost> reads;
  for (const Block& block : live_) read_back.emplace_back(block.size);
  for (size_t i = 0; i < live_.size(); ++i) {
    reads.push_back(DeviceToHost{read_back[i].data(), live_[i].offset, live_[i].size});
  }
  ASSERT_TRUE(arena_->device().Read(reads).ok());
  for (size_t i = 0; i < live_.size(); ++i) EXPECT_EQ(read_back[i], contents[i]) << "block " << i;

  // Block to block on the device: the first 4 KiB of the 64 KiB block take
  // the 4 KiB block's bytes.
  ASSERT_TRUE(
      arena_->device().Copy({DeviceToDevice{live_[1].offset, live_[0].offset, kMinBlock}}).ok());
  std::vector<char> copied(live_[1].size);
  ASSERT_TRUE(
      arena_->device().Read({DeviceToHost{copied.data(), live_[1].offset, copied.size()}}).ok());
  EXPECT_EQ(std::memcmp(copied.data(), contents[0].data(), kMinBlock), 0);
  EXPECT_EQ(std::memcmp(copied.data() + kMinBlock, contents[1].data() + kMinBlock,
                        copied.size() - kMinBlock),
            0);

  // Zero a whole block that spans granules; its neighbours keep their bytes.
  ASSERT_TRUE(arena_->device().Zero({DeviceRange{live_[3].offset, live_[3].size}}).ok());
  std::vector<char> zeroed(live_[3].size, 1);
  ASSERT_TRUE(
      arena_->device().Read({DeviceToHost{zeroed.data(), live_[3].offset, zeroed.size()}}).ok());
  EXPECT_EQ(zeroed, std::vector<char>(live_[3].size, 0));
  for (size_t i : {size_t{0}, size_t{2}, size_t{4}}) {
    std::vector<char> bytes(live_[i].size);
    ASSERT_TRUE(
        arena_->device().Read({DeviceToHost{bytes.data(), live_[i].offset, bytes.size()}}).ok());
    EXPECT_EQ(bytes, contents[i]) << "block " << i;
  }
}

TEST(ArenaLifetimeTest, DestroyingTheArenaDecommitsEverything) {
  RecordingDevice device(HostDevice::Create(8 * kGranule).value());
  {
    Arena arena(&device, kMinBlock);
    ASSERT_TRUE(arena.Allocate(kMinBlock).ok());
    ASSERT_TRUE(arena.Allocate(2 * kGranule).ok());
    ASSERT_FALSE(device.committed_granules().empty());
  }
  EXPECT_TRUE(device.committed_granules().empty());
  for (const std::string& violation : device.violations()) ADD_FAILURE() << violation;
}

// Random allocations and frees of assorted sizes: after every step the
// committed granules are exactly those under live blocks, and every live
// block still holds the tag written into it (no overlap, no decommit under a
// live block).
TEST_F(ArenaTest, RandomWorkloadKeepsCommitmentAndDataConsistent) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::geometric_distribution<int> order_of(0.3);
  const int max_order = std::countr_zero(kGranules * kGranule / kMinBlock);
  std::vector<uint64_t> tags;  // parallel to live_

  auto tag_block = [&](const Block& block, uint64_t tag) {
    ASSERT_TRUE(
        device_
            ->Write({HostToDevice{block.offset, &tag, sizeof tag},
                     HostToDevice{block.offset + block.size - sizeof tag, &tag, sizeof tag}})
            .ok());
  };
  auto expect_tag = [&](const Block& block, uint64_t tag) {
    uint64_t head = 0, tail = 0;
    ASSERT_TRUE(
        device_
            ->Read({DeviceToHost{&head, block.offset, sizeof head},
                    DeviceToHost{&tail, block.offset + block.size - sizeof tail, sizeof tail}})
            .ok());
    EXPECT_EQ(head, tag) << "block at " << block.offset;
    EXPECT_EQ(tail, tag) << "block at " << block.offset;
  };

  double alloc_probability = 0.5;
  constexpr int kOperations = 20'000;
  for (int op = 0; op < kOperations; ++op) {
    if (op % 2000 == 0) alloc_probability = std::uniform_real_distribution<double>(0.3, 0.8)(rng);
    if (live_.empty() || std::bernoulli_distribution(alloc_probability)(rng)) {
      const uint64_t size = kMinBlock << std::min(order_of(rng), max_order);
      absl::StatusOr<Block> block = arena_->Allocate(size);
      if (block.ok()) {
        const uint64_t tag = rng();
        live_.push_back(*block);
        tags.push_back(tag);
        tag_block(*block, tag);
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
        ASSERT_LT(arena_->Stats().blocks.largest_free, size) << "op " << op;
      }
    } else {
      const size_t index = std::uniform_int_distribution<size_t>(0, live_.size() - 1)(rng);
      expect_tag(live_[index], tags[index]);
      FreeLive(index);
      tags.erase(tags.begin() + index);
    }
    ExpectCommittedGranulesFollowLiveBlocks();
    if (::testing::Test::HasFailure()) FAIL() << "op " << op;
  }
  for (size_t i = 0; i < live_.size(); ++i) expect_tag(live_[i], tags[i]);
}

TEST(ArenaConcurrencyTest, ConcurrentAllocateWriteReadFree) {
  RecordingDevice device(HostDevice::Create(16 * kGranule).value());
  Arena arena(&device, kMinBlock);
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&arena, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<Block, uint64_t>> held;
      for (int round = 0; round < kRounds; ++round) {
        if (held.size() < 8 && rng() % 2 == 0) {
          absl::StatusOr<Block> block = arena.Allocate(kMinBlock << (rng() % 6));
          if (!block.ok()) continue;
          const uint64_t tag = rng();
          EXPECT_TRUE(arena.device().Write({HostToDevice{block->offset, &tag, sizeof tag}}).ok());
          held.emplace_back(*block, tag);
        } else if (!held.empty()) {
          auto [block, tag] = held.back();
          held.pop_back();
          uint64_t read = 0;
          EXPECT_TRUE(arena.device().Read({DeviceToHost{&read, block.offset, sizeof read}}).ok());
          EXPECT_EQ(read, tag) << "another thread wrote into this block";
          arena.Free(block);
        }
      }
      for (const auto& [block, tag] : held) arena.Free(block);
    });
  }
  for (std::thread& thread : threads) thread.join();
  const ArenaStats stats = arena.Stats();
  EXPECT_EQ(stats.blocks.used, 0u);
  EXPECT_EQ(stats.blocks.allocated_blocks, 0u);
  EXPECT_EQ(stats.committed_bytes, 0u);
  EXPECT_TRUE(device.committed_granules().empty());
  for (const std::string& violation : device.violations()) ADD_FAILURE() << violation;
}

TEST_F(ArenaTest, SplitHalvesKeepTheirGranuleUntilBothAreFreed) {
  const Block block = MustAllocate(4 * kMinBlock);
  live_.clear();
  const auto [lower, upper] = arena_->Split(block);
  EXPECT_EQ(lower.offset, block.offset);
  EXPECT_EQ(upper.offset, block.offset + 2 * kMinBlock);
  EXPECT_EQ(lower.size, 2 * kMinBlock);
  EXPECT_EQ(upper.size, 2 * kMinBlock);
  live_ = {lower, upper};
  ExpectCommittedGranulesFollowLiveBlocks();
  FreeLive(1);
  ExpectCommittedGranulesFollowLiveBlocks();  // lower still holds the granule
  FreeLive(0);
  ExpectCommittedGranulesFollowLiveBlocks();
  EXPECT_EQ(arena_->Stats().blocks.used, 0u);
}

TEST_F(ArenaTest, SplittingAMultiGranuleBlockLeavesEachHalfItsGranules) {
  const Block block = MustAllocate(4 * kGranule);
  live_.clear();
  const auto [lower, upper] = arena_->Split(block);
  live_ = {lower, upper};
  FreeLive(1);
  ExpectCommittedGranulesFollowLiveBlocks();  // the upper two granules went back
  EXPECT_EQ(arena_->Stats().committed_bytes, 2 * kGranule);
}

// A slow commit holds up only allocations that need its granule.
TEST_F(ArenaTest, AllocationsWaitForTheirGranulesCommitOnly) {
  device_->CloseGate();
  absl::StatusOr<Block> first, second;
  std::thread committer([&] { first = arena_->Allocate(kMinBlock); });
  device_->AwaitCallsAtGate(1);
  // The arena's lock is free while the commit runs.
  EXPECT_EQ(arena_->Stats().blocks.used, kMinBlock);
  // The next block lands in the same granule: it must wait for the commit.
  std::thread waiter([&] { second = arena_->Allocate(kMinBlock); });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
  device_->OpenGate();
  committer.join();
  waiter.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->offset / kGranule, second->offset / kGranule);
  EXPECT_EQ(device_->granules_committed(), 1u);
  live_ = {*first, *second};
  ExpectCommittedGranulesFollowLiveBlocks();
}

// When the commit fails, everyone waiting for that granule fails with it,
// and the granule is tried afresh later.
TEST_F(ArenaTest, AFailedCommitFailsItsWaitersAndIsRetriedLater) {
  device_->FailCommitsBeyond(0);
  device_->CloseGate();
  absl::StatusOr<Block> first, second;
  std::thread committer([&] { first = arena_->Allocate(kMinBlock); });
  device_->AwaitCallsAtGate(1);
  std::thread waiter([&] { second = arena_->Allocate(kMinBlock); });
  absl::SleepFor(absl::Milliseconds(50));
  device_->OpenGate();
  committer.join();
  waiter.join();
  EXPECT_TRUE(absl::IsResourceExhausted(first.status())) << first.status();
  EXPECT_TRUE(absl::IsResourceExhausted(second.status())) << second.status();
  EXPECT_EQ(arena_->Stats().blocks.used, 0u);
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
  device_->AllowCommits();
  MustAllocate(kMinBlock);
  ExpectCommittedGranulesFollowLiveBlocks();
}

// Decommitting a freed granule runs outside the arena's lock (deleting a
// large file decommits many): allocations go on meanwhile, and one that
// lands in that very granule waits for the decommit, then commits it
// afresh, never twice.
TEST_F(ArenaTest, ADecommitHoldsUpOnlyAllocationsInItsGranule) {
  const Block block = MustAllocate(kMinBlock);
  live_.clear();
  device_->CloseGate();
  std::thread freer([&] { arena_->Free(block); });
  device_->AwaitCallsAtGate(1);
  // The arena's lock is free while the decommit runs.
  EXPECT_EQ(arena_->Stats().blocks.used, 0u);
  std::atomic<bool> allocated{false};
  absl::StatusOr<Block> again;
  std::thread allocator([&] {
    again = arena_->Allocate(kMinBlock);
    allocated = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(allocated) << "allocated in a granule still being decommitted";
  device_->OpenGate();
  freer.join();
  allocator.join();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->offset / kGranule, block.offset / kGranule);
  EXPECT_EQ(device_->granules_committed(), 2u);
  live_ = {*again};
  ExpectCommittedGranulesFollowLiveBlocks();
  EXPECT_TRUE(device_->violations().empty()) << device_->violations().front();
}

// AllocateExclusive passes over free ranges the device says still share
// memory with a neighbour.
TEST_F(ArenaTest, AllocateExclusivePassesOverRangesTheDeviceRefuses) {
  device_->RefuseExclusiveBelow(4 * kGranule);
  absl::StatusOr<Block> block = arena_->AllocateExclusive(kGranule);
  ASSERT_TRUE(block.ok()) << block.status();
  live_.push_back(*block);
  EXPECT_EQ(block->offset, 4 * kGranule);
  EXPECT_EQ(MustAllocate(4 * kGranule).offset, 0u) << "the ranges passed over stay free";
  device_->RefuseExclusiveBelow(kGranules * kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->AllocateExclusive(kGranule).status()));
}

// Fills granules [0, granules) with min_blocks and frees all but
// `keep[g]` of granule g's (its first ones); returns the blocks kept.
std::vector<Block> Thin(Arena& arena, const std::vector<uint64_t>& keep, size_t part = 0) {
  constexpr uint64_t kPerGranule = kGranule / kMinBlock;
  std::vector<Block> kept;
  std::vector<Block> freed;
  for (uint64_t g = 0; g < keep.size(); ++g) {
    for (uint64_t i = 0; i < kPerGranule; ++i) {
      absl::StatusOr<Block> block = arena.Allocate(kMinBlock, part);
      EXPECT_TRUE(block.ok()) << block.status();
      if (!block.ok()) return kept;
      (i < keep[g] ? kept : freed).push_back(*block);
    }
  }
  for (const Block& block : freed) arena.Free(block);
  return kept;
}

// Moves every block of `blocks` that `plan` empties as ExtentMap::Compact
// would (content aside): a block for compaction, then the old one freed.
void MoveOut(Arena& arena, const CompactionPlan& plan, std::vector<Block>& blocks) {
  for (Block& block : blocks) {
    if (!plan.Empties(block.offset, block.size)) continue;
    absl::StatusOr<Block> moved =
        arena.AllocateForCompaction(block.size, arena.PartOf(block.offset), plan);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_EQ(arena.PartOf(moved->offset), arena.PartOf(block.offset));
    EXPECT_FALSE(plan.Empties(moved->offset, moved->size));
    arena.Free(block);
    block = *moved;
  }
}

// Below the slack (a few granules' worth free, or a share of what the
// partly used granules hold) nothing is planned.
TEST_F(ArenaTest, CompactionWaitsForMoreThanTheSlackFree) {
  const uint64_t per_granule = kGranule / kMinBlock;
  // Five granules seven eighths used: 5/8 of a granule free.
  live_ = Thin(*arena_, std::vector<uint64_t>(5, per_granule * 7 / 8));
  EXPECT_TRUE(arena_->PlanCompaction(UINT64_MAX).empty());
  // An eighth used each: 4.375 granules free, more than the slack of 4.
  std::vector<Block> kept;
  for (const Block& block : live_) {
    if ((block.offset % kGranule) / kMinBlock < per_granule / 8) {
      kept.push_back(block);
    } else {
      arena_->Free(block);
    }
  }
  live_ = kept;
  const CompactionPlan plan = arena_->PlanCompaction(UINT64_MAX);
  EXPECT_EQ(plan.granules(), 4u) << "four eighths fit in the fifth granule's free seven";
  EXPECT_EQ(plan.bytes(), 4 * kGranule / 8);
  ExpectCommittedGranulesFollowLiveBlocks();
}

// The sparsest granules empty into the fullest, as many as those have room
// for; the moves commit nothing, and the emptied granules go back.
TEST_F(ArenaTest, CompactionEmptiesTheSparsestGranulesIntoTheFullest) {
  const uint64_t per_granule = kGranule / kMinBlock;
  std::vector<uint64_t> keep;
  for (uint64_t g = 0; g < 8; ++g) keep.push_back((g + 1) * per_granule / 32);
  live_ = Thin(*arena_, keep);
  const uint64_t used = arena_->Stats().blocks.used;
  ASSERT_EQ(arena_->Stats().committed_bytes, 8 * kGranule);

  EXPECT_EQ(arena_->PlanCompaction(1).granules(), 1u) << "a budget of a byte plans one granule";
  const CompactionPlan plan = arena_->PlanCompaction(UINT64_MAX);
  // Granule 7 has 24/32 free: room for granules 0 to 5 (21/32), not 6.
  EXPECT_EQ(plan.granules(), 6u);
  EXPECT_EQ(plan.bytes(), 21 * kGranule / 32);
  for (uint64_t g = 0; g < 8; ++g) {
    EXPECT_EQ(plan.Empties(g * kGranule, kMinBlock), g < 6) << "granule " << g;
  }
  EXPECT_FALSE(plan.Empties(0, kGranule)) << "a block of a granule fills its own";

  const uint64_t commits = device_->granules_committed();
  ASSERT_NO_FATAL_FAILURE(MoveOut(*arena_, plan, live_));
  EXPECT_EQ(device_->granules_committed(), commits) << "compaction committed memory";
  for (const Block& block : live_) EXPECT_GE(block.offset / kGranule, 6u);
  EXPECT_EQ(arena_->Stats().blocks.used, used);
  EXPECT_EQ(arena_->Stats().committed_bytes, 2 * kGranule);
  ExpectCommittedGranulesFollowLiveBlocks();
  EXPECT_TRUE(arena_->PlanCompaction(UINT64_MAX).empty()) << "nothing more worth moving";
}

// The fullest granule fills first, then the next; one that has no room,
// or is gone, takes nothing: no block of compaction commits memory.
TEST_F(ArenaTest, AllocateForCompactionOnlyFillsCommittedGranulesOfThePlan) {
  const uint64_t per_granule = kGranule / kMinBlock;
  live_ = Thin(*arena_, {1, 1, 1, 1, 1, per_granule - 1});
  const CompactionPlan plan = arena_->PlanCompaction(UINT64_MAX);
  // Granule 5 has room for one block, granule 4 (the fullest left) for the
  // rest.
  ASSERT_EQ(plan.granules(), 4u);
  EXPECT_FALSE(plan.Empties(4 * kGranule, kMinBlock));
  const auto granule_of_next = [&]() -> uint64_t {
    absl::StatusOr<Block> block = arena_->AllocateForCompaction(kMinBlock, 0, plan);
    if (!block.ok()) return UINT64_MAX;
    live_.push_back(*block);
    return block->offset / kGranule;
  };
  EXPECT_EQ(granule_of_next(), 5u);
  EXPECT_EQ(granule_of_next(), 4u);
  // Once granule 4 is emptied and decommitted, it takes nothing.
  std::vector<Block> kept;
  for (const Block& live : live_) {
    if (live.offset / kGranule == 4) {
      arena_->Free(live);
    } else {
      kept.push_back(live);
    }
  }
  live_ = kept;
  const uint64_t commits = device_->granules_committed();
  EXPECT_TRUE(
      absl::IsResourceExhausted(arena_->AllocateForCompaction(kMinBlock, 0, plan).status()));
  EXPECT_EQ(device_->granules_committed(), commits);
  ExpectCommittedGranulesFollowLiveBlocks();
}

// Each GPU's granules gather within it; host memory's (a spill part) stay
// as they are.
TEST(ArenaCompactionPartsTest, EachGpuCompactsWithinItselfAndTheSpillNot) {
  constexpr uint64_t kPartGranules = 8;
  constexpr size_t kSpill = 2;
  std::vector<std::unique_ptr<Device>> gpus;
  for (int i = 0; i < 2; ++i) gpus.push_back(HostDevice::Create(kPartGranules * kGranule).value());
  RecordingDevice device(
      PooledDevice::Create(std::move(gpus), HostDevice::Create(kPartGranules * kGranule).value())
          .value());
  Arena arena(&device, kMinBlock);
  const std::vector<uint64_t> keep(6, kGranule / kMinBlock / 8);
  std::vector<Block> blocks;
  for (size_t part = 0; part < 3; ++part) {
    for (const Block& block : Thin(arena, keep, part)) {
      ASSERT_EQ(arena.PartOf(block.offset), part);
      blocks.push_back(block);
    }
  }
  const CompactionPlan plan = arena.PlanCompaction(UINT64_MAX);
  EXPECT_EQ(plan.granules(), 10u) << "five of each GPU's six";
  for (const Block& block : blocks) {
    if (arena.PartOf(block.offset) == kSpill) {
      EXPECT_FALSE(plan.Empties(block.offset, block.size));
    }
  }
  ASSERT_NO_FATAL_FAILURE(MoveOut(arena, plan, blocks));
  const ArenaStats stats = arena.Stats();
  EXPECT_EQ(stats.parts[0].committed_bytes, kGranule);
  EXPECT_EQ(stats.parts[1].committed_bytes, kGranule);
  EXPECT_EQ(stats.parts[kSpill].committed_bytes, 6 * kGranule);
  for (const Block& block : blocks) arena.Free(block);
  EXPECT_TRUE(device.committed_granules().empty());
  for (const std::string& violation : device.violations()) ADD_FAILURE() << violation;
}

// Two host devices as the GPUs (parts 0 and 1) and a third as the spill
// (part 2), each of kPartGranules granules.
class SpillArenaTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kPartGranules = 4;
  static constexpr size_t kSpill = 2;

  void SetUp() override { MakeArena(); }

  void MakeArena(uint64_t capacity = std::numeric_limits<uint64_t>::max()) {
    std::vector<std::unique_ptr<Device>> gpus;
    for (int i = 0; i < 2; ++i) {
      gpus.push_back(HostDevice::Create(kPartGranules * kGranule).value());
    }
    device_ = std::make_unique<RecordingDevice>(
        PooledDevice::Create(std::move(gpus), HostDevice::Create(kPartGranules * kGranule).value())
            .value());
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock, capacity);
  }

  void TearDown() override {
    for (const Block& block : live_) arena_->Free(block);
    live_.clear();
    const ArenaStats stats = arena_->Stats();
    EXPECT_EQ(stats.blocks.used, 0u);
    EXPECT_EQ(stats.committed_bytes, 0u);
    EXPECT_TRUE(device_->committed_granules().empty());
    arena_.reset();
    for (const std::string& violation : device_->violations()) ADD_FAILURE() << violation;
  }

  Block MustAllocate(uint64_t size, size_t part) {
    absl::StatusOr<Block> block = arena_->Allocate(size, part);
    EXPECT_TRUE(block.ok()) << block.status();
    if (!block.ok()) return Block{};
    live_.push_back(*block);
    return *block;
  }

  // Allocates granules in `part` (none elsewhere) until it is full; its
  // used bytes must be whole granules.
  void Fill(size_t part) {
    while (arena_->Stats().parts[part].used < arena_->Stats().parts[part].capacity) {
      ASSERT_EQ(arena_->PartOf(MustAllocate(kGranule, part).offset), part);
    }
  }

  std::unique_ptr<RecordingDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::vector<Block> live_;
};

TEST_F(SpillArenaTest, KnowsItsSpillPartAndTheGpusBeforeIt) {
  ASSERT_EQ(arena_->part_count(), 3u);
  EXPECT_FALSE(arena_->IsSpillPart(0));
  EXPECT_FALSE(arena_->IsSpillPart(1));
  EXPECT_TRUE(arena_->IsSpillPart(kSpill));
  EXPECT_EQ(arena_->leading_parts(), 2u);
  const std::vector<DevicePart> parts = device_->parts();
  for (size_t p = 0; p < parts.size(); ++p) {
    EXPECT_EQ(arena_->PartOf(parts[p].range.offset), p);
    EXPECT_EQ(arena_->PartOf(parts[p].range.offset + parts[p].range.length - 1), p);
  }
  EXPECT_EQ(arena_->capacity(), 3 * kPartGranules * kGranule) << "the spill counts in it";

  RecordingDevice single(HostDevice::Create(kGranule).value());
  Arena plain(&single, kMinBlock);
  EXPECT_FALSE(plain.IsSpillPart(0));
  EXPECT_EQ(plain.leading_parts(), 1u);
}

// The named part first, then the other GPU, though the spill is emptier,
// and the spill only once both GPUs are full.
TEST_F(SpillArenaTest, AllocateOffersTheSpillOnlyWhenEveryGpuIsFull) {
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 0).offset), 0u);
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 1).offset), 1u);
  ASSERT_NO_FATAL_FAILURE(Fill(1));
  for (uint64_t i = 1; i < kPartGranules; ++i) {
    EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 1).offset), 0u) << "granule " << i;
  }
  EXPECT_EQ(arena_->Stats().parts[0].used, kPartGranules * kGranule);
  EXPECT_EQ(arena_->Stats().parts[kSpill].used, 0u);
  for (size_t named : {size_t{0}, size_t{1}}) {
    const Block block = MustAllocate(kGranule, named);
    EXPECT_EQ(arena_->PartOf(block.offset), kSpill) << "named part " << named;
    EXPECT_EQ(device_->committed_granules().count(block.offset / kGranule), 1u);
  }
  EXPECT_EQ(arena_->Stats().parts[kSpill].used, 2 * kGranule);
  // A GPU's room, once back, is offered before the spill again.
  arena_->Free(live_.front());
  live_.erase(live_.begin());
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 1).offset), 0u);
}

// A part held back (room made for another program) comes after every
// other part, the spill included, and is a file's start no more.
TEST_F(SpillArenaTest, APartHeldBackIsOfferedLast) {
  arena_->HoldBack(0, true);
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 0).offset), 1u) << "named, but held back";
  EXPECT_EQ(placement::Home(arena_->Places()), 1u);
  arena_->HoldBack(1, true);
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 0).offset), kSpill);
  ASSERT_NO_FATAL_FAILURE(Fill(kSpill));
  EXPECT_NE(arena_->PartOf(MustAllocate(kGranule, 0).offset), kSpill)
      << "a part held back still takes what nothing else can";
  arena_->HoldBack(0, false);
  arena_->HoldBack(1, false);
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 0).offset), 0u);
}

TEST_F(SpillArenaTest, AFileStartsInTheEmptiestGpuNeverTheSpill) {
  EXPECT_NE(placement::Home(arena_->Places()), kSpill);
  MustAllocate(2 * kGranule, 0);
  MustAllocate(kGranule, 1);
  EXPECT_EQ(placement::Home(arena_->Places()), 1u) << "the spill is emptier still";
  MustAllocate(2 * kGranule, 1);
  EXPECT_EQ(placement::Home(arena_->Places()), 0u);
  ASSERT_NO_FATAL_FAILURE(Fill(0));
  ASSERT_NO_FATAL_FAILURE(Fill(1));
  EXPECT_FALSE(arena_->IsSpillPart(placement::Home(arena_->Places()))) << "both GPUs are full";
}

TEST_F(SpillArenaTest, AllocateExclusiveNeverUsesTheSpill) {
  absl::StatusOr<Block> named_spill = arena_->AllocateExclusive(kGranule, kSpill);
  ASSERT_TRUE(named_spill.ok()) << named_spill.status();
  live_.push_back(*named_spill);
  EXPECT_NE(arena_->PartOf(named_spill->offset), kSpill);
  ASSERT_NO_FATAL_FAILURE(Fill(0));
  ASSERT_NO_FATAL_FAILURE(Fill(1));
  const BuddyStats before = arena_->Stats().blocks;
  for (size_t part = 0; part < 3; ++part) {
    absl::StatusOr<Block> block = arena_->AllocateExclusive(kGranule, part);
    EXPECT_TRUE(absl::IsResourceExhausted(block.status())) << "part " << part << ": "
                                                           << block.status();
  }
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->AllocateExclusive(kMinBlock).status()));
  ExpectSameBlockStats(arena_->Stats().blocks, before);
  EXPECT_EQ(arena_->Stats().parts[kSpill].committed_bytes, 0u);
  EXPECT_EQ(arena_->PartOf(MustAllocate(kGranule, 0).offset), kSpill) << "Allocate still may";
}

// A move holds its old block and its new one for a moment: the new one is
// had past the capacity, yet the arena never reports more used than it
// has, and is back as it was once the old block is freed.
TEST_F(SpillArenaTest, AllocateForMoveGoesPastTheCapacityForAMoment) {
  MakeArena(2 * kGranule);
  const Block old_block = MustAllocate(2 * kGranule, 0);
  live_.clear();
  const ArenaStats full = arena_->Stats();
  ASSERT_EQ(full.blocks.used, 2 * kGranule);
  ASSERT_EQ(full.blocks.free, 0u);
  ASSERT_TRUE(absl::IsResourceExhausted(arena_->Allocate(kMinBlock, kSpill).status()));

  absl::StatusOr<Block> moved = arena_->AllocateForMove(2 * kGranule, {kSpill});
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->size, 2 * kGranule);
  EXPECT_EQ(arena_->PartOf(moved->offset), kSpill);
  ArenaStats during = arena_->Stats();
  EXPECT_EQ(during.blocks.capacity, 2 * kGranule);
  EXPECT_EQ(during.blocks.used, 2 * kGranule) << "more used than the capacity";
  EXPECT_EQ(during.blocks.free, 0u);
  EXPECT_EQ(during.blocks.largest_free, 0u);
  EXPECT_EQ(during.blocks.fragmentation, 0.0);
  EXPECT_EQ(during.parts[0].used, 2 * kGranule);
  EXPECT_EQ(during.parts[kSpill].used, 2 * kGranule);
  EXPECT_EQ(during.committed_bytes, 4 * kGranule);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, 0u);
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->Allocate(kMinBlock, 1).status()))
      << "an allocation past the capacity while the move holds both";
  // A second move on top of the first.
  absl::StatusOr<Block> another = arena_->AllocateForMove(kMinBlock, {1});
  ASSERT_TRUE(another.ok()) << another.status();
  EXPECT_EQ(arena_->Stats().blocks.used, 2 * kGranule);
  arena_->Free(*another);

  arena_->Free(old_block);
  live_.push_back(*moved);
  const ArenaStats after = arena_->Stats();
  ExpectSameBlockStats(after.blocks, full.blocks);
  EXPECT_EQ(after.parts[0].used, 0u);
  EXPECT_EQ(after.parts[0].committed_bytes, 0u);
  EXPECT_EQ(after.committed_bytes, 2 * kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->Allocate(kMinBlock, 0).status()));

  arena_->Free(*moved);
  live_.clear();
  EXPECT_EQ(arena_->Stats().blocks.free, 2 * kGranule);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, 2 * kGranule);
}

TEST_F(SpillArenaTest, AllocateForMoveTriesThePartsInTheOrderGiven) {
  const auto move_into = [&](std::vector<size_t> parts) -> absl::StatusOr<size_t> {
    absl::StatusOr<Block> block = arena_->AllocateForMove(kGranule, parts);
    if (!block.ok()) return block.status();
    live_.push_back(*block);
    EXPECT_EQ(block->size, kGranule);
    return arena_->PartOf(block->offset);
  };
  EXPECT_EQ(move_into({kSpill, 0}).value_or(99), kSpill);
  EXPECT_EQ(move_into({1, kSpill}).value_or(99), 1u);
  EXPECT_EQ(move_into({0}).value_or(99), 0u);
  ASSERT_NO_FATAL_FAILURE(Fill(1));
  EXPECT_EQ(move_into({1, 0, kSpill}).value_or(99), 0u) << "part 1 is full";
  EXPECT_EQ(move_into({1, kSpill, 0}).value_or(99), kSpill);
  ASSERT_NO_FATAL_FAILURE(Fill(0));
  EXPECT_TRUE(absl::IsResourceExhausted(move_into({1, 0}).status()))
      << "never a part not given, though the spill has room";
  EXPECT_TRUE(absl::IsResourceExhausted(move_into({}).status()));
  const uint64_t spill_used = arena_->Stats().parts[kSpill].used;
  while (move_into({kSpill}).ok()) {
  }
  EXPECT_EQ(arena_->Stats().parts[kSpill].used, kPartGranules * kGranule);
  EXPECT_GT(arena_->Stats().parts[kSpill].used, spill_used);
  EXPECT_TRUE(absl::IsResourceExhausted(move_into({0, 1, kSpill}).status()));
}

// A part that cannot back the block (its device refuses the memory) leaves
// the move to the next part given.
TEST_F(SpillArenaTest, AllocateForMovePassesOverAPartThatCannotBackTheBlock) {
  const Block in_spill = MustAllocate(kMinBlock, kSpill);
  device_->FailCommitsBeyond(0);
  absl::StatusOr<Block> block = arena_->AllocateForMove(kMinBlock, {0, kSpill});
  ASSERT_TRUE(block.ok()) << block.status();
  live_.push_back(*block);
  EXPECT_EQ(arena_->PartOf(block->offset), kSpill);
  EXPECT_EQ(block->offset / kGranule, in_spill.offset / kGranule) << "in a committed granule";
  EXPECT_TRUE(absl::IsResourceExhausted(arena_->AllocateForMove(kMinBlock, {0, 1}).status()));
  EXPECT_EQ(arena_->Stats().parts[0].used, 0u);
  EXPECT_EQ(arena_->Stats().parts[1].used, 0u);
  device_->AllowCommits();
}

// A move into host memory takes memory the device keeps ready where there
// is some (it needs no commit), and any other where there is none.
TEST(SpillArenaReadyTest, AMoveIntoTheSpillTakesReadyMemoryFirst) {
  // The pool, with the spill's memory ready from `ready_from` up.
  class ReadyFrom final : public DeviceWrapper, public SpillReadiness {
   public:
    using DeviceWrapper::DeviceWrapper;
    SpillReadiness* spill_readiness() override { return this; }
    bool KeepReady(uint64_t /*bytes*/) override { return false; }
    uint64_t ready_bytes() const override { return 0; }
    bool IsReady(uint64_t offset, uint64_t /*length*/) const override {
      return offset >= ready_from;
    }
    uint64_t ready_from = std::numeric_limits<uint64_t>::max();
  };
  constexpr uint64_t kGranules = 8;
  std::vector<std::unique_ptr<Device>> gpus;
  gpus.push_back(HostDevice::Create(kGranules * kGranule).value());
  ReadyFrom device(
      PooledDevice::Create(std::move(gpus), HostDevice::Create(kGranules * kGranule).value())
          .value());
  Arena arena(&device, kMinBlock, std::numeric_limits<uint64_t>::max());
  const uint64_t spill = device.parts()[1].range.offset;
  device.ready_from = spill + 6 * kGranule;

  absl::StatusOr<Block> ready = arena.AllocateForMove(kGranule, {1});
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_GE(ready->offset, spill + 6 * kGranule) << "the lowest free block is not ready";
  absl::StatusOr<Block> also = arena.AllocateForMove(kGranule, {1});
  ASSERT_TRUE(also.ok()) << also.status();
  EXPECT_GE(also->offset, spill + 6 * kGranule);
  absl::StatusOr<Block> other = arena.AllocateForMove(kGranule, {1});
  ASSERT_TRUE(other.ok()) << "no ready memory left: any will do";
  EXPECT_LT(other->offset, spill + 6 * kGranule);
  // A GPU part is taken as always, ready or not.
  absl::StatusOr<Block> on_gpu = arena.AllocateForMove(kGranule, {0});
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(on_gpu->offset, 0u);
  for (const Block& block : {*ready, *also, *other, *on_gpu}) arena.Free(block);
}

// Claim takes the very block another arena on the same memory handed out,
// committing its granules as an allocation would, and refuses a block
// taken, out of place or out of range.
TEST_F(ArenaTest, ClaimTakesExactlyTheBlockAskedFor) {
  const Block block{5 * kGranule + 3 * kMinBlock, kMinBlock};
  ASSERT_TRUE(arena_->Claim(block).ok());
  live_.push_back(block);
  const Block large{8 * kGranule, 2 * kGranule};
  ASSERT_TRUE(arena_->Claim(large).ok());
  live_.push_back(large);
  ExpectCommittedGranulesFollowLiveBlocks();
  EXPECT_EQ(arena_->Stats().blocks.used, kMinBlock + 2 * kGranule);

  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim(block))) << "taken";
  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim({8 * kGranule + kGranule, kMinBlock})))
      << "inside a taken block";
  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim({kMinBlock, 2 * kMinBlock}))) << "misaligned";
  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim({0, 3 * kMinBlock}))) << "no power of two";
  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim({kGranules * kGranule, kMinBlock})))
      << "past the end";
  EXPECT_TRUE(absl::IsInvalidArgument(arena_->Claim({~uint64_t{0} - kMinBlock + 1, kMinBlock})));
  ExpectCommittedGranulesFollowLiveBlocks();
  // What was claimed is allocated: nothing else gets it.
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<Block> other = arena_->Allocate(kMinBlock);
    if (!other.ok()) break;
    live_.push_back(*other);
    EXPECT_TRUE(other->offset + kMinBlock <= block.offset || other->offset >= block.offset + kMinBlock);
  }
}

}  // namespace
}  // namespace cudafs
