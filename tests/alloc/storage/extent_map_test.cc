#include "alloc/storage/extent_map.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "alloc/base/errors.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pooled_device.h"
#include "alloc/storage/arena.h"
#include "gtest/gtest.h"
#include "tests/support/arena_dirt.h"
#include "tests/support/random_pattern.h"
#include "tests/support/test_scale.h"
#include "tests/support/test_seed.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;
constexpr char kDirt = static_cast<char>(0xAA);

class ExtentMapTest : public ::testing::Test {
 protected:
  void MakeArena(uint64_t size) {
    arena_.reset();
    auto device = HostDevice::Create(size);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
  }

  void SetUp() override { MakeArena(64 * MiB); }

  void TearDown() override {
    for (const Block& block : held_) arena_->Free(block);
    held_.clear();
    if (arena_) {
      EXPECT_EQ(arena_->Stats().blocks.used, 0u);
      EXPECT_EQ(arena_->Stats().blocks.allocated_blocks, 0u);
    }
  }

  // A space for maps over `arena`, kept for the test.
  const ExtentMap::Space* SpaceOf(Arena* arena, uint64_t max_extent) {
    return &spaces_.emplace_back(arena, max_extent);
  }

  uint64_t Used() const { return arena_->Stats().blocks.used; }
  // Blocks the arena has handed out but those the test holds itself: a
  // map's extents, where the test has one map.
  size_t Blocks() const { return arena_->Stats().blocks.allocated_blocks - held_.size(); }

  void DirtyArena() { cudafs::DirtyArena(*arena_, kDirt, &held_); }

  // Allocates min_blocks until the arena is full, then frees every other
  // one, so the largest free block is min_block.
  void FragmentArena() {
    std::vector<Block> blocks;
    while (true) {
      absl::StatusOr<Block> block = arena_->Allocate(kMinBlock);
      if (!block.ok()) break;
      blocks.push_back(*block);
    }
    for (const Block& block : blocks) {
      if ((block.offset / kMinBlock) % 2 == 0) {
        arena_->Free(block);
      } else {
        held_.push_back(block);
      }
    }
    ASSERT_EQ(arena_->Stats().blocks.largest_free, kMinBlock);
  }

  static std::string ReadAll(const ExtentMap& map, uint64_t offset, size_t length) {
    std::string out(length, '?');
    absl::Status status = map.Read(offset, length, out.data());
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  static std::string RandomBytes(std::mt19937_64& rng, size_t length) {
    std::string s(length, '\0');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);  // never 0 or 0xAA
    return s;
  }

  std::unique_ptr<HostDevice> device_;
  std::deque<ExtentMap::Space> spaces_;
  std::unique_ptr<Arena> arena_;
  std::vector<Block> held_;
};

bool IsMapped(const ExtentMap& map, uint64_t offset) { return map.NextData(offset) == offset; }

bool AllZero(const std::string& s, size_t from = 0, size_t to = std::string::npos) {
  to = std::min(to, s.size());
  for (size_t i = from; i < to; ++i) {
    if (s[i] != 0) return false;
  }
  return true;
}

TEST_F(ExtentMapTest, EmptyMapReadsZeros) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  EXPECT_EQ(map.allocated_bytes(), 0u);
  EXPECT_EQ(Blocks(), 0u);
  std::string out = ReadAll(map, 12345, 10000);
  EXPECT_TRUE(AllZero(out));
  EXPECT_FALSE(map.NextData(0).has_value());
  EXPECT_EQ(map.NextHole(0), 0u);
  EXPECT_EQ(map.NextHole(777), 777u);
  EXPECT_TRUE(map.Read(0, 0, nullptr).ok());
  EXPECT_TRUE(map.Write(0, nullptr, 0).ok());
  EXPECT_TRUE(map.Reserve(0, 0).ok());
  EXPECT_EQ(map.allocated_bytes(), 0u);
}

// A map keeps one extent in place and a B-tree from the second on: every
// change between the two keeps the map's bytes, holes and counts.
TEST_F(ExtentMapTest, OneExtentToManyAndBack) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  const std::string a(4 * KiB, 'a'), b(4 * KiB, 'b'), c(4 * KiB, 'c');
  ASSERT_TRUE(map.Write(0, a.data(), a.size()).ok());
  EXPECT_EQ(Blocks(), 1u);
  EXPECT_EQ(map.NextHole(0), 4 * KiB);
  ASSERT_TRUE(map.Write(64 * KiB, c.data(), c.size()).ok());
  ASSERT_TRUE(map.Write(32 * KiB, b.data(), b.size()).ok());
  EXPECT_EQ(Blocks(), 3u);
  EXPECT_EQ(map.allocated_bytes(), 12 * KiB);
  EXPECT_EQ(map.NextData(4 * KiB), 32 * KiB);
  EXPECT_EQ(map.NextHole(32 * KiB), 36 * KiB);

  ASSERT_TRUE(map.PunchHole(0, 4 * KiB).ok());
  EXPECT_EQ(Blocks(), 2u);
  ASSERT_TRUE(map.PunchHole(32 * KiB, 4 * KiB).ok());
  EXPECT_EQ(Blocks(), 1u);
  EXPECT_EQ(map.allocated_bytes(), 4 * KiB);
  EXPECT_EQ(Used(), 4 * KiB);
  EXPECT_EQ(map.NextData(0), 64 * KiB);
  EXPECT_FALSE(map.NextData(68 * KiB).has_value());
  const std::string all = ReadAll(map, 0, 68 * KiB);
  EXPECT_TRUE(AllZero(all, 0, 64 * KiB));
  EXPECT_EQ(all.substr(64 * KiB), c);

  // Back to two, then none.
  ASSERT_TRUE(map.Write(0, a.data(), a.size()).ok());
  EXPECT_EQ(Blocks(), 2u);
  EXPECT_EQ(ReadAll(map, 0, 4 * KiB), a);
  ASSERT_TRUE(map.Truncate(0).ok());
  EXPECT_EQ(Blocks(), 0u);
  EXPECT_EQ(map.allocated_bytes(), 0u);
  EXPECT_EQ(Used(), 0u);
  EXPECT_FALSE(map.NextData(0).has_value());

  // One block split down to one of its quarters.
  const std::string d(16 * KiB, 'd');
  ASSERT_TRUE(map.Write(0, d.data(), d.size()).ok());
  EXPECT_EQ(Blocks(), 1u);
  ASSERT_TRUE(map.Truncate(4 * KiB).ok());
  EXPECT_EQ(Blocks(), 1u);
  EXPECT_EQ(map.allocated_bytes(), 4 * KiB);
  EXPECT_EQ(Used(), 4 * KiB);
  EXPECT_EQ(ReadAll(map, 0, 4 * KiB), d.substr(0, 4 * KiB));
}

TEST_F(ExtentMapTest, SimpleRoundTrip) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  const std::string data = "hello, extent map";
  ASSERT_TRUE(map.Write(10, data.data(), data.size()).ok());
  EXPECT_EQ(ReadAll(map, 10, data.size()), data);
  std::string around = ReadAll(map, 0, 100);
  EXPECT_TRUE(AllZero(around, 0, 10));
  EXPECT_EQ(around.substr(10, data.size()), data);
  EXPECT_TRUE(AllZero(around, 10 + data.size()));
  EXPECT_EQ(map.allocated_bytes(), kMinBlock);
  EXPECT_EQ(Used(), kMinBlock);
}

TEST_F(ExtentMapTest, GrowthPolicy4KiBFileTakesOneBlock) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::string data(4096, 'x');
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(map.allocated_bytes(), 4096u);
  EXPECT_EQ(Blocks(), 1u);
}

TEST_F(ExtentMapTest, GrowthPolicy5KiBFileTakes8KiB) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::string data(5 * KiB, 'x');
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(map.allocated_bytes(), 8 * KiB);
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
}

TEST_F(ExtentMapTest, GrowthPolicyTinyFileTakesMinBlock) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  ASSERT_TRUE(map.Write(0, "x", 1).ok());
  EXPECT_EQ(map.allocated_bytes(), kMinBlock);
}

TEST_F(ExtentMapTest, GrowthPolicy1MiBWriteIsOneExtent) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::mt19937_64 rng(1);
  std::string data = RandomBytes(rng, 1 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(Blocks(), 1u);
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB);
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
  // A large file written in 1 MiB requests maps one extent per request.
  for (int i = 1; i < 8; ++i) {
    std::string more = RandomBytes(rng, 1 * MiB);
    ASSERT_TRUE(map.Write(i * MiB, more.data(), more.size()).ok());
  }
  EXPECT_EQ(Blocks(), 8u);
  EXPECT_EQ(map.allocated_bytes(), 8 * MiB);
}

TEST_F(ExtentMapTest, GrowthPolicyCappedAtMaxExtent) {
  ExtentMap map(SpaceOf(arena_.get(), 256 * KiB));
  std::string data(1 * MiB, 'z');
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(Blocks(), 4u);
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB);
}

TEST_F(ExtentMapTest, GrowthPolicyAppendsCostAtMostTwiceTheSize) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::mt19937_64 rng(2);
  std::string model;
  for (int i = 0; i < 1000; ++i) {
    const size_t length = 1 + rng() % 9000;
    std::string data = RandomBytes(rng, length);
    ASSERT_TRUE(map.Write(model.size(), data.data(), data.size()).ok());
    model += data;
    const uint64_t rounded = (model.size() + kMinBlock - 1) / kMinBlock * kMinBlock;
    EXPECT_LE(map.allocated_bytes(), std::max<uint64_t>(2 * rounded, kMinBlock)) << i;
    EXPECT_GE(map.allocated_bytes(), rounded);
  }
  EXPECT_EQ(ReadAll(map, 0, model.size()), model);
  EXPECT_EQ(map.allocated_bytes(), Used());
}

TEST_F(ExtentMapTest, SparseWriteMapsOnlyNearTheData) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  // A small write far into the file gets a block no larger than max_extent
  // and nothing before it.
  ASSERT_TRUE(map.Write(100 * MiB + 5, "abc", 3).ok());
  EXPECT_LE(map.allocated_bytes(), 1 * MiB);
  EXPECT_EQ(Blocks(), 1u);
  std::optional<uint64_t> data = map.NextData(0);
  ASSERT_TRUE(data.has_value());
  EXPECT_LE(*data, 100 * MiB + 5);
  EXPECT_GT(*data, 98 * MiB);
  EXPECT_EQ(map.NextHole(0), 0u);
  EXPECT_GT(map.NextHole(100 * MiB), 100 * MiB + 7);
  EXPECT_EQ(ReadAll(map, 100 * MiB + 5, 3), "abc");
  EXPECT_TRUE(AllZero(ReadAll(map, 100 * MiB - 4096, 4101)));
}

TEST_F(ExtentMapTest, FileBiggerThanLargestFreeBlockStillFits) {
  MakeArena(4 * MiB);
  FragmentArena();
  const uint64_t used_before = Used();
  {
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    std::mt19937_64 rng(3);
    std::string data = RandomBytes(rng, 1 * MiB + 100);
    ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
    EXPECT_EQ(Blocks(), (1 * MiB) / kMinBlock + 1);
    EXPECT_EQ(map.allocated_bytes(), 1 * MiB + kMinBlock);
    EXPECT_EQ(ReadAll(map, 0, data.size()), data);
    // Reserve on a fragmented arena works too.
    ASSERT_TRUE(map.Reserve(2 * MiB, 64 * KiB).ok());
    EXPECT_TRUE(AllZero(ReadAll(map, 2 * MiB, 64 * KiB)));
    EXPECT_EQ(ReadAll(map, 0, data.size()), data);
  }
  EXPECT_EQ(Used(), used_before);
}

TEST_F(ExtentMapTest, EnospcLeavesMapUnchanged) {
  MakeArena(2 * MiB);
  std::mt19937_64 rng(4);
  ExtentMap a(SpaceOf(arena_.get(), 1 * MiB));
  ExtentMap b(SpaceOf(arena_.get(), 1 * MiB));
  std::string a_data = RandomBytes(rng, 1 * MiB);
  std::string b_data = RandomBytes(rng, 512 * KiB);
  ASSERT_TRUE(a.Write(0, a_data.data(), a_data.size()).ok());
  ASSERT_TRUE(b.Write(0, b_data.data(), b_data.size()).ok());
  // Leave 256 KiB free, as a few scattered blocks.
  std::vector<Block> filler;
  for (int i = 0; i < 4; ++i) filler.push_back(*arena_->Allocate(64 * KiB));
  ASSERT_EQ(Used(), 2 * MiB - 256 * KiB + 4 * 0 * KiB + 0);
  const uint64_t used = Used();
  const uint64_t a_allocated = a.allocated_bytes();
  const size_t blocks = Blocks();  // a's, b's and the filler's
  const uint64_t b_allocated = b.allocated_bytes();

  // Overlaps existing data (which must not change) and needs more than is
  // free; some blocks are mapped before the arena runs out and must be
  // rolled back.
  std::string big = RandomBytes(rng, 1 * MiB);
  absl::Status status = a.Write(768 * KiB, big.data(), big.size());
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_EQ(ToErrno(status), ENOSPC);
  EXPECT_EQ(a.allocated_bytes(), a_allocated);
  EXPECT_EQ(Blocks(), blocks);
  EXPECT_EQ(Used(), used);
  EXPECT_EQ(ReadAll(a, 0, 2 * MiB), a_data + std::string(1 * MiB, '\0'));
  EXPECT_FALSE(a.NextData(1 * MiB).has_value());

  status = a.Reserve(1 * MiB, 1 * MiB);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_EQ(a.allocated_bytes(), a_allocated);
  EXPECT_EQ(Used(), used);
  EXPECT_FALSE(a.NextData(1 * MiB).has_value());

  // Sparse write into a fresh map: same.
  ExtentMap c(SpaceOf(arena_.get(), 1 * MiB));
  status = c.Write(3 * MiB, big.data(), 300 * KiB);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_EQ(c.allocated_bytes(), 0u);
  EXPECT_EQ(Blocks(), blocks) << "c mapped nothing";
  EXPECT_EQ(Used(), used);

  // Other maps untouched.
  EXPECT_EQ(b.allocated_bytes(), b_allocated);
  EXPECT_EQ(ReadAll(b, 0, b_data.size()), b_data);
  EXPECT_EQ(ReadAll(a, 0, a_data.size()), a_data);

  // What does fit still works afterwards.
  ASSERT_TRUE(c.Write(0, big.data(), 256 * KiB).ok());
  EXPECT_EQ(ReadAll(c, 0, 256 * KiB), big.substr(0, 256 * KiB));
  EXPECT_EQ(arena_->Stats().blocks.free, 0u);
  for (const Block& block : filler) arena_->Free(block);
}

TEST_F(ExtentMapTest, FreedBlocksComeBack) {
  std::mt19937_64 rng(5);
  {
    ExtentMap a(SpaceOf(arena_.get(), 1 * MiB));
    ExtentMap b(SpaceOf(arena_.get(), 64 * KiB));
    for (int i = 0; i < 200; ++i) {
      std::string data = RandomBytes(rng, 1 + rng() % 100000);
      ExtentMap& m = i % 2 ? a : b;
      ASSERT_TRUE(m.Write(rng() % (8 * MiB), data.data(), data.size()).ok());
    }
    ASSERT_TRUE(a.Reserve(20 * MiB, 3 * MiB).ok());
    EXPECT_EQ(Used(), a.allocated_bytes() + b.allocated_bytes());
    EXPECT_GT(arena_->Stats().committed_bytes, 0u);
    // Punching and truncating give blocks back too.
    ASSERT_TRUE(a.PunchHole(0, 4 * MiB).ok());
    ASSERT_TRUE(b.Truncate(0).ok());
    EXPECT_EQ(b.allocated_bytes(), 0u);
    EXPECT_EQ(Used(), a.allocated_bytes());
    EXPECT_FALSE(a.NextData(0).value_or(4 * MiB) < 4 * MiB);
  }
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(arena_->Stats().blocks.allocated_blocks, 0u);
  EXPECT_EQ(arena_->Stats().committed_bytes, 0u);
  EXPECT_EQ(arena_->Stats().blocks.largest_free, arena_->Stats().blocks.free);
}

TEST_F(ExtentMapTest, TruncateFreesAndZeroes) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::string data(3 * MiB, 'q');
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(map.Truncate(1 * MiB + 10).ok());
  // The min_block holding byte 1 MiB + 10 stays, everything after it goes,
  // though it was part of a larger block.
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB + kMinBlock);
  EXPECT_EQ(map.NextData(1 * MiB + 10), 1 * MiB + 10);
  EXPECT_FALSE(map.NextData(2 * MiB).has_value());
  std::string out = ReadAll(map, 0, 3 * MiB);
  EXPECT_EQ(out.substr(0, 1 * MiB + 10), data.substr(0, 1 * MiB + 10));
  EXPECT_TRUE(AllZero(out, 1 * MiB + 10));
  ASSERT_TRUE(map.Truncate(0).ok());
  EXPECT_EQ(map.allocated_bytes(), 0u);
  EXPECT_EQ(Used(), 0u);
}

TEST_F(ExtentMapTest, PunchHoleFreesWholeBlocksAndZeroesPartials) {
  ExtentMap map(SpaceOf(arena_.get(), 64 * KiB));
  std::string data(1 * MiB, 'p');
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  ASSERT_EQ(Blocks(), 16u);
  // Covers blocks 2..5 entirely and parts of 1 and 6: those are split, and
  // their min_blocks wholly inside go too.
  ASSERT_TRUE(map.PunchHole(64 * KiB + 1, 6 * 64 * KiB - 2).ok());
  const uint64_t first_free = 64 * KiB + kMinBlock;  // past the min_block of byte 64 KiB + 1
  const uint64_t last_free = 7 * 64 * KiB - kMinBlock;
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB - (last_free - first_free));
  EXPECT_EQ(Used(), map.allocated_bytes());
  EXPECT_EQ(map.NextHole(0), first_free);
  EXPECT_EQ(map.NextData(first_free), last_free);
  std::string expected = data;
  std::fill(expected.begin() + 64 * KiB + 1, expected.begin() + 7 * 64 * KiB - 1, '\0');
  EXPECT_EQ(ReadAll(map, 0, 1 * MiB), expected);
  // A punch that reaches the largest offset does not overflow.
  ASSERT_TRUE(map.PunchHole(512 * KiB, UINT64_MAX).ok());
  expected.replace(512 * KiB, 512 * KiB, 512 * KiB, '\0');
  EXPECT_EQ(ReadAll(map, 0, 1 * MiB), expected);
  EXPECT_FALSE(map.NextData(512 * KiB).has_value());
}

TEST_F(ExtentMapTest, NextDataNextHole) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  const std::string five(5 * KiB, 'b');
  ASSERT_TRUE(map.Write(64 * KiB, "a", 1).ok());  // after a hole: one 4 KiB block
  // An append (it starts in the block after the data's): [68 KiB, 72 KiB),
  // then growth: [72 KiB, 80 KiB), not just the 4 KiB it needs.
  ASSERT_TRUE(map.Write(68 * KiB, five.data(), five.size()).ok());
  ASSERT_TRUE(map.Reserve(256 * KiB, 1).ok());  // exactly one block
  ASSERT_TRUE(map.Write(1 * MiB, "c", 1).ok());
  EXPECT_EQ(map.NextData(0), 64 * KiB);
  EXPECT_EQ(map.NextData(64 * KiB + 5), 64 * KiB + 5);
  EXPECT_EQ(map.NextHole(64 * KiB), 80 * KiB);
  EXPECT_EQ(map.NextHole(0), 0u);
  EXPECT_EQ(map.NextData(76 * KiB), 76 * KiB) << "the append's growth";
  EXPECT_EQ(map.NextData(80 * KiB), 256 * KiB);
  EXPECT_EQ(map.NextHole(256 * KiB), 260 * KiB);
  EXPECT_EQ(map.NextData(260 * KiB), 1 * MiB);
  EXPECT_EQ(map.NextHole(1 * MiB), 1 * MiB + 4 * KiB);
  EXPECT_FALSE(map.NextData(1 * MiB + 4 * KiB).has_value());
}

// Issue 13: a write into a hole of a sparse file holds only the pages it
// touches, as on tmpfs. It used to get a block of up to max_extent (1 MiB),
// kept after close: 1000 random 4 KiB writes into a 1 GiB sparse file needed
// up to 1000 MiB.
TEST_F(ExtentMapTest, RandomWritesIntoASparseFileHoldOnlyTheirPages) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::mt19937_64 rng(31);
  std::string page = RandomBytes(rng, 4 * KiB);
  std::set<uint64_t> pages;
  std::map<uint64_t, std::string> model;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t offset = rng() % (1024 * MiB / (4 * KiB)) * 4 * KiB;
    page[0] = static_cast<char>('a' + i % 26);
    ASSERT_TRUE(map.Write(offset, page.data(), page.size()).ok()) << i;
    pages.insert(offset);
    model[offset] = page;
  }
  EXPECT_EQ(map.allocated_bytes(), pages.size() * 4 * KiB);
  EXPECT_EQ(Used(), map.allocated_bytes());
  for (const auto& [offset, data] : model) {
    ASSERT_EQ(ReadAll(map, offset, data.size()), data) << offset;
    ASSERT_EQ(map.NextHole(offset), pages.contains(offset + 4 * KiB) ? map.NextHole(offset + 4 * KiB)
                                                                     : offset + 4 * KiB);
  }
  // Unaligned writes into holes hold their range rounded out to pages.
  ExtentMap other(SpaceOf(arena_.get(), 1 * MiB));
  const std::string twelve_kib = RandomBytes(rng, 12 * KiB);
  ASSERT_TRUE(other.Write(512 * MiB - 100, twelve_kib.data(), twelve_kib.size()).ok());
  EXPECT_EQ(other.allocated_bytes(), 16 * KiB);
  EXPECT_EQ(other.NextData(0), 512 * MiB - 4 * KiB);
  EXPECT_EQ(other.NextHole(512 * MiB - 4 * KiB), 512 * MiB + 12 * KiB);
}

// Issue 13: one-byte writes 16 MiB apart each left a hole before them and
// each took 1 MiB, so 64 of them filled a 64 MiB arena.
TEST_F(ExtentMapTest, WritesFarApartHoldOnePageEach) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(map.Write(i * 16 * MiB, "x", 1).ok()) << i;
  }
  EXPECT_EQ(map.allocated_bytes(), 64 * 4 * KiB);
  EXPECT_EQ(Blocks(), 64u);
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_EQ(ReadAll(map, i * 16 * MiB, 2), std::string("x\0", 2));
  }
}

// fallocate reserves what it names, not a max_extent block around it.
TEST_F(ExtentMapTest, ReserveHoldsOnlyItsRange) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  ASSERT_TRUE(map.Reserve(512 * MiB, 1).ok());
  EXPECT_EQ(map.allocated_bytes(), 4 * KiB);
  ASSERT_TRUE(map.Reserve(100 * KiB, 200 * KiB).ok());
  EXPECT_EQ(map.allocated_bytes(), 4 * KiB + 200 * KiB);
  EXPECT_EQ(map.NextData(0), 100 * KiB);
  EXPECT_EQ(map.NextHole(100 * KiB), 300 * KiB);
}

// Appends keep the growth policy: a file streamed in 1 MiB writes is one
// 1 MiB extent per write, one grown in 4 KiB writes settles into max_extent
// blocks after a short ladder, and so does a stream that starts past a hole
// (only its first write is mapped exactly).
TEST_F(ExtentMapTest, AppendsStillGrowInLargeExtents) {
  MakeArena(128 * MiB);
  std::mt19937_64 rng(32);
  const std::string chunk = RandomBytes(rng, 1 * MiB);
  {
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    for (uint64_t i = 0; i < 64; ++i) {
      ASSERT_TRUE(map.Write(i * MiB, chunk.data(), chunk.size()).ok());
    }
    EXPECT_EQ(Blocks(), 64u);
    EXPECT_EQ(map.allocated_bytes(), 64 * MiB);
  }
  {
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    for (uint64_t at = 0; at < 8 * MiB; at += 4 * KiB) {
      ASSERT_TRUE(map.Write(at, chunk.data() + at % MiB, 4 * KiB).ok());
    }
    // 4, 4, 8, ..., 512 KiB up to 1 MiB (9 extents), then 1 MiB each.
    EXPECT_EQ(Blocks(), 9u + 7u);
    EXPECT_EQ(map.allocated_bytes(), 8 * MiB);
  }
  {
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    const uint64_t base = 40 * MiB;
    for (uint64_t at = 0; at < 8 * MiB; at += 64 * KiB) {
      ASSERT_TRUE(map.Write(base + at, chunk.data() + at % MiB, 64 * KiB).ok());
    }
    // 64 KiB mapped exactly, then the ladder 64, 128, 256, 512 KiB up to
    // the next 1 MiB boundary, then 1 MiB each.
    EXPECT_EQ(Blocks(), 5u + 7u);
    EXPECT_EQ(map.allocated_bytes(), 8 * MiB);
    EXPECT_EQ(ReadAll(map, base + 3 * MiB, 64 * KiB), chunk.substr(0, 64 * KiB));
  }
}

// Security: blocks that held someone else's bytes never show them.
TEST_F(ExtentMapTest, RecycledBlocksNeverExposeOldBytes) {
  MakeArena(4 * MiB);
  DirtyArena();
  std::mt19937_64 rng(6);
  auto check_clean = [](const std::string& s) {
    return std::find(s.begin(), s.end(), kDirt) == s.end();
  };
  {
    // New file, small write in the middle of a block.
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    ASSERT_TRUE(map.Write(5000, "xyz", 3).ok());
    std::string out = ReadAll(map, 0, 2 * kMinBlock);
    EXPECT_TRUE(check_clean(out));
    EXPECT_EQ(out.substr(5000, 3), "xyz");
  }
  {
    // Holes between sparse writes.
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    ASSERT_TRUE(map.Write(1, "a", 1).ok());
    ASSERT_TRUE(map.Write(300 * KiB + 7, "b", 1).ok());
    ASSERT_TRUE(map.Write(900 * KiB, "c", 1).ok());
    EXPECT_TRUE(check_clean(ReadAll(map, 0, 1 * MiB)));
  }
  {
    // Truncate down into a block, then extend (writes past the cut).
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    std::string data = RandomBytes(rng, 200 * KiB);
    ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
    ASSERT_TRUE(map.Truncate(1000).ok());
    ASSERT_TRUE(map.Write(150 * KiB, "e", 1).ok());
    std::string out = ReadAll(map, 0, 256 * KiB);
    EXPECT_TRUE(check_clean(out));
    EXPECT_EQ(out.substr(0, 1000), data.substr(0, 1000));
    EXPECT_TRUE(AllZero(out, 1000, 150 * KiB));
  }
  {
    // Reserve.
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    ASSERT_TRUE(map.Reserve(12345, 700 * KiB).ok());
    EXPECT_GE(map.allocated_bytes(), 700 * KiB);
    std::string out = ReadAll(map, 0, 1 * MiB);
    EXPECT_TRUE(check_clean(out));
    EXPECT_TRUE(AllZero(out));
  }
  {
    // Punch holes then re-read.
    ExtentMap map(SpaceOf(arena_.get(), 64 * KiB));
    std::string data = RandomBytes(rng, 256 * KiB);
    ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
    ASSERT_TRUE(map.PunchHole(1000, 100 * KiB).ok());
    ASSERT_TRUE(map.Write(50 * KiB, "f", 1).ok());
    std::string out = ReadAll(map, 0, 256 * KiB);
    EXPECT_TRUE(check_clean(out));
  }
  // Many small files in a row, each writing a few bytes somewhere.
  for (int i = 0; i < 200; ++i) {
    ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
    const uint64_t offset = rng() % (1 * MiB);
    ASSERT_TRUE(map.Write(offset, "g", 1).ok());
    const uint64_t start = offset / (64 * KiB) * (64 * KiB);
    std::string out = ReadAll(map, start, 64 * KiB);
    ASSERT_TRUE(check_clean(out)) << i;
  }
}

// Random writes, reads, truncates, punches and reserves against a
// std::string model, on an arena full of dirt.
TEST_F(ExtentMapTest, RandomizedAgainstModel) {
  MakeArena(4 * MiB);
  DirtyArena();
  const uint64_t held = Used();
  constexpr uint64_t kCap = 1 * MiB;
  std::mt19937_64 rng(7);
  {
    ExtentMap map(SpaceOf(arena_.get(), 256 * KiB));
    std::string model(kCap, '\0');
    auto random_range = [&](uint64_t* offset, uint64_t* length) {
      uint64_t len;
      switch (rng() % 4) {
        case 0: len = 1 + rng() % 64; break;
        case 1: len = 1 + rng() % 8192; break;
        case 2: len = 1 + rng() % (128 * KiB); break;
        default: len = 1 + rng() % (512 * KiB); break;
      }
      uint64_t off = rng() % (kCap - len + 1);
      if (rng() % 4 == 0) off = off / kMinBlock * kMinBlock;  // aligned starts
      if (rng() % 8 == 0 && off + len < kCap) {
        len = std::min<uint64_t>(kCap - off, (off + len + kMinBlock - 1) / kMinBlock * kMinBlock -
                                                   off);  // aligned ends
      }
      *offset = off;
      *length = len;
    };
    auto check_invariants = [&](uint64_t x) {
      const std::optional<uint64_t> data = map.NextData(x);
      const uint64_t hole = map.NextHole(x);
      ASSERT_GE(hole, x);
      if (data) {
        ASSERT_GE(*data, x);
        ASSERT_GT(map.NextHole(*data), *data) << "NextData not mapped";
        ASSERT_TRUE(IsMapped(map, *data));
        if (*data > x) {
          ASSERT_EQ(hole, x);
          // [x, data) is unmapped, so the model must be zero there.
          const uint64_t to = std::min(*data, kCap);
          if (x < kCap) {
            ASSERT_TRUE(AllZero(model, x, to)) << "data lost in a hole";
            ASSERT_TRUE(AllZero(ReadAll(map, x, to - x)));
          }
        } else {
          ASSERT_GT(hole, x);
        }
      } else {
        ASSERT_EQ(hole, x);
        if (x < kCap) {
          ASSERT_TRUE(AllZero(model, x));
        }
      }
      // NextHole is unmapped, and its hole reads as zero.
      ASSERT_FALSE(IsMapped(map, hole));
      if (hole < kCap) {
        const uint64_t hole_end = std::min(map.NextData(hole).value_or(kCap), kCap);
        ASSERT_GT(hole_end, hole);
        ASSERT_TRUE(AllZero(model, hole, hole_end)) << "data lost in a hole";
        ASSERT_TRUE(AllZero(ReadAll(map, hole, hole_end - hole)));
      }
    };

    for (int op = 0; op < Scaled(12000); ++op) {
      uint64_t offset, length;
      random_range(&offset, &length);
      const int kind = rng() % 10;
      if (kind < 5) {
        std::string data = RandomBytes(rng, length);
        ASSERT_TRUE(map.Write(offset, data.data(), length).ok());
        model.replace(offset, length, data);
        ASSERT_TRUE(IsMapped(map, offset));
        ASSERT_GE(map.NextHole(offset), offset + length);
      } else if (kind < 7) {
        ASSERT_TRUE(map.PunchHole(offset, length).ok());
        std::fill(model.begin() + offset, model.begin() + offset + length, '\0');
      } else if (kind < 8) {
        // Truncate (less often, and usually not to 0, so the file keeps
        // content).
        const uint64_t size = rng() % 4 == 0 ? offset : offset + length;
        ASSERT_TRUE(map.Truncate(size).ok());
        std::fill(model.begin() + std::min(size, kCap), model.end(), '\0');
        const std::optional<uint64_t> after = map.NextData(size);
        ASSERT_TRUE(!after.has_value() || *after == size);
      } else {
        ASSERT_TRUE(map.Reserve(offset, length).ok());
        ASSERT_TRUE(IsMapped(map, offset));
        ASSERT_GE(map.NextHole(offset), offset + length);
      }
      ASSERT_EQ(map.allocated_bytes(), Used() - held) << "op " << op;
      // A random window every op.
      {
        uint64_t o, l;
        random_range(&o, &l);
        ASSERT_EQ(ReadAll(map, o, l), model.substr(o, l)) << "op " << op;
      }
      check_invariants(rng() % (kCap + 64 * KiB));
      check_invariants(offset);
      if (op % 8 == 0) {
        ASSERT_EQ(ReadAll(map, 0, kCap), model) << "op " << op;
        // Reads that go past everything ever mapped are zeros.
        ASSERT_TRUE(AllZero(ReadAll(map, kCap, 64 * KiB)));
      }
    }
    ASSERT_EQ(ReadAll(map, 0, kCap), model);
  }
  EXPECT_EQ(Used(), held);
}

// Several maps share the arena; interleaved random writes never bleed into
// each other.
TEST_F(ExtentMapTest, MapsDoNotInterfere) {
  std::mt19937_64 rng(8);
  constexpr int kMaps = 6;
  constexpr uint64_t kCap = 512 * KiB;
  std::vector<std::unique_ptr<ExtentMap>> maps;
  std::vector<std::string> models(kMaps, std::string(kCap, '\0'));
  for (int i = 0; i < kMaps; ++i) {
    maps.push_back(std::make_unique<ExtentMap>(SpaceOf(arena_.get(), (64 * KiB) << (i % 3))));
  }
  for (int op = 0; op < 3000; ++op) {
    const int i = rng() % kMaps;
    const uint64_t length = 1 + rng() % (32 * KiB);
    const uint64_t offset = rng() % (kCap - length + 1);
    if (rng() % 5 == 0) {
      ASSERT_TRUE(maps[i]->PunchHole(offset, length).ok());
      std::fill(models[i].begin() + offset, models[i].begin() + offset + length, '\0');
    } else {
      std::string data = RandomBytes(rng, length);
      ASSERT_TRUE(maps[i]->Write(offset, data.data(), length).ok());
      models[i].replace(offset, length, data);
    }
    if (op % 100 == 0) {
      for (int j = 0; j < kMaps; ++j) ASSERT_EQ(ReadAll(*maps[j], 0, kCap), models[j]);
    }
  }
  uint64_t total = 0;
  for (const auto& m : maps) total += m->allocated_bytes();
  EXPECT_EQ(total, Used());
  maps.clear();
  EXPECT_EQ(Used(), 0u);
}

TEST_F(ExtentMapTest, TrimTailGivesBackGrowthPastTheEnd) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::mt19937_64 rng(11);
  const std::string data = RandomBytes(rng, 40 * KiB + 100);
  // 32 KiB at 0, then a 32 KiB block for the last 8 KiB: 64 KiB held.
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(map.allocated_bytes(), 64 * KiB);
  map.TrimTail(data.size());
  EXPECT_EQ(map.allocated_bytes(), 44 * KiB);  // 40 KiB + 100 B, rounded to 4 KiB
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
  EXPECT_EQ(ReadAll(map, data.size(), 64 * KiB), std::string(64 * KiB, '\0'));
  EXPECT_EQ(arena_->Stats().blocks.used, 44 * KiB);
  // Trimming again changes nothing; growing again works.
  map.TrimTail(data.size());
  EXPECT_EQ(map.allocated_bytes(), 44 * KiB);
  ASSERT_TRUE(map.Write(100 * KiB, "z", 1).ok());
  EXPECT_EQ(ReadAll(map, 100 * KiB - 1, 3), std::string("\0z\0", 3));
}

TEST_F(ExtentMapTest, TrimTailKeepsReservedSpace) {
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  ASSERT_TRUE(map.Write(0, "a", 1).ok());
  ASSERT_TRUE(map.Reserve(0, 100 * KiB).ok());  // fallocate KEEP_SIZE
  const uint64_t reserved = map.allocated_bytes();
  map.TrimTail(1);
  EXPECT_GE(map.allocated_bytes(), 100 * KiB);
  EXPECT_LE(map.allocated_bytes(), reserved);
  EXPECT_EQ(map.NextHole(0), 100 * KiB) << "reserved bytes were given back";
  // Truncate drops the reservation; then trimming takes everything past 4 KiB.
  ASSERT_TRUE(map.Truncate(1).ok());
  map.TrimTail(1);
  EXPECT_EQ(map.allocated_bytes(), 4 * KiB);
}

// copy_file_range's path: device-to-device copies, holes as zeros, within
// one map and between two, checked against byte-string models.
TEST_F(ExtentMapTest, CopyFromMatchesModel) {
  std::mt19937_64 rng(21);
  ExtentMap a(SpaceOf(arena_.get(), 1 * MiB)), b(SpaceOf(arena_.get(), 1 * MiB));
  std::string model_a, model_b;
  auto write = [&](ExtentMap& map, std::string& model, uint64_t offset, const std::string& data) {
    ASSERT_TRUE(map.Write(offset, data.data(), data.size()).ok());
    if (model.size() < offset + data.size()) model.resize(offset + data.size(), '\0');
    model.replace(offset, data.size(), data);
  };
  auto random = [&](uint64_t bound) { return std::uniform_int_distribution<uint64_t>(0, bound)(rng); };
  // Sparse sources: data, holes, data.
  write(a, model_a, 0, RandomBytes(rng, 100 * KiB));
  write(a, model_a, 300 * KiB, RandomBytes(rng, 50 * KiB));
  write(b, model_b, 0, std::string(50 * KiB, 'z'));
  for (int i = 0; i < 300; ++i) {
    SCOPED_TRACE(i);
    const bool within = random(2) == 0;
    ExtentMap& to = random(1) ? a : b;
    std::string& to_model = &to == &a ? model_a : model_b;
    ExtentMap& from = within ? to : (&to == &a ? b : a);
    std::string& from_model = &from == &a ? model_a : model_b;
    const uint64_t length = 1 + random(200 * KiB);
    const uint64_t source = random(2 * MiB);
    uint64_t target = random(2 * MiB);
    if (within && source < target + length && target < source + length) continue;
    // Bytes past a model's end are zeros (holes), as in the map.
    std::string piece = source < from_model.size() ? from_model.substr(source, length) : "";
    piece.resize(length, '\0');
    ASSERT_TRUE(to.CopyFrom(from, source, target, length).ok());
    if (to_model.size() < target + length) to_model.resize(target + length, '\0');
    to_model.replace(target, length, piece);
    if (i % 10 == 0) {
      ASSERT_EQ(ReadAll(a, 0, model_a.size()), model_a);
      ASSERT_EQ(ReadAll(b, 0, model_b.size()), model_b);
    }
  }
  EXPECT_EQ(ReadAll(a, 0, model_a.size()), model_a);
  EXPECT_EQ(ReadAll(b, 0, model_b.size()), model_b);
}

// Bytes past the end of the data are never zeroed on the device (a GPU
// kernel each time, which slows every other program on the GPU): a stream
// of appends and a truncate make no zeroing call, yet what lies past the
// end reads as zeros, and becomes zeros once data grows over it.
TEST_F(ExtentMapTest, AppendsAndTruncatesZeroNothingYetThePastReadsAsZeros) {
  DirtyArena();
  FaultyDevice faulty(device_.get());
  Arena arena(&faulty, kMinBlock);
  faulty.SetPlan(FaultPlan{.probability = 1.0, .ops = kFaultZero});
  {
    ExtentMap map(SpaceOf(&arena, 1 * MiB));
    std::mt19937_64 rng(11);
    std::string data;
    for (int i = 0; i < 300; ++i) {  // 4 KiB and odd appends, into blocks up to 1 MiB
      const std::string piece = RandomBytes(rng, i % 3 == 0 ? 4096 : 1000 + i);
      ASSERT_TRUE(map.Write(data.size(), piece.data(), piece.size()).ok()) << "append " << i;
      data += piece;
    }
    ASSERT_GT(map.allocated_bytes(), data.size()) << "no growth slack to test";
    // The slack past the end holds dirt on the device but reads as zeros.
    const uint64_t mapped = map.NextHole(0);
    ASSERT_GT(mapped, data.size());
    std::string expected = data + std::string(mapped - data.size(), '\0');
    EXPECT_TRUE(ReadAll(map, 0, mapped) == expected);

    const uint64_t cut = data.size() / 2 + 10;
    ASSERT_TRUE(map.Truncate(cut).ok());
    EXPECT_TRUE(ReadAll(map, 0, mapped) == data.substr(0, cut) + std::string(mapped - cut, '\0'));

    // A write past the end must zero the gap before it (the gap is then
    // below the end of the data, read from the device): refused while
    // zeroing fails; then done, and the gap reads zeros, not dirt.
    const std::string later(100, 'L');
    const uint64_t at = cut + 3 * kMinBlock + 7;
    EXPECT_FALSE(map.Write(at, later.data(), later.size()).ok());
    faulty.SetProbability(0);
    ASSERT_TRUE(map.Write(at, later.data(), later.size()).ok());
    expected = data.substr(0, cut) + std::string(at - cut, '\0') + later;
    EXPECT_TRUE(ReadAll(map, 0, expected.size()) == expected);
    // A copy from past the source's end of data copies zeros.
    ExtentMap copy(SpaceOf(&arena, 1 * MiB));
    ASSERT_TRUE(copy.CopyFrom(map, 0, 0, mapped).ok());
    expected.resize(mapped, '\0');
    EXPECT_TRUE(ReadAll(copy, 0, mapped) == expected);
  }
}

// A punch that fails to zero its partial min_blocks frees nothing: the
// blocks it split stay mapped, the bytes read as before, and the punch
// succeeds later.
TEST_F(ExtentMapTest, AFailedPunchFreesNothing) {
  FaultyDevice faulty(device_.get());
  Arena arena(&faulty, kMinBlock);
  ExtentMap map(SpaceOf(&arena, 1 * MiB));
  std::mt19937_64 rng(12);
  const std::string data = RandomBytes(rng, 1 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  ASSERT_EQ(arena.Stats().blocks.allocated_blocks, 1u);
  const uint64_t used = arena.Stats().blocks.used;

  faulty.SetPlan(FaultPlan{.probability = 1.0, .ops = kFaultZero});
  EXPECT_FALSE(map.PunchHole(100, 600 * KiB).ok());
  faulty.SetProbability(0);
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB);
  EXPECT_EQ(arena.Stats().blocks.used, used);
  EXPECT_EQ(map.NextHole(0), 1 * MiB);
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);

  ASSERT_TRUE(map.PunchHole(100, 600 * KiB).ok());
  std::string expected = data;
  std::fill(expected.begin() + 100, expected.begin() + 100 + 600 * KiB, '\0');
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == expected);
  EXPECT_EQ(map.NextHole(0), kMinBlock);
  EXPECT_EQ(map.allocated_bytes(), 1 * MiB - (600 * KiB + 100) / kMinBlock * kMinBlock + kMinBlock);
}

// The device bytes of `ranges`, back to back: what an importer maps.
std::string SharedBytes(Device& device, const std::vector<DeviceRange>& ranges) {
  std::string out;
  for (const DeviceRange& range : ranges) {
    std::string part(range.length, '?');
    EXPECT_TRUE(device.Read({{part.data(), range.offset, range.length}}).ok());
    out += part;
  }
  return out;
}

// Small blocks and holes move into blocks of a granule or more, each a
// range of its own; the bytes stay, and what lies past the data is zero,
// though the arena held dirt there.
TEST_F(ExtentMapTest, ShareMovesSmallBlocksIntoRangesOfTheirOwn) {
  constexpr uint64_t kGranule = HostDevice::kGranule;
  std::mt19937_64 rng(21);
  {
    // Dirt where the file's blocks will come from.
    ExtentMap dirt(SpaceOf(arena_.get(), 1 * MiB));
    const std::string bytes(16 * MiB, kDirt);
    ASSERT_TRUE(dirt.Write(0, bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(dirt.Write(16 * MiB, "x", 1).ok());  // keeps the granules committed
    ExtentMap keep(SpaceOf(arena_.get(), 1 * MiB));
    ASSERT_TRUE(keep.Write(0, "k", 1).ok());
  }
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::string data = RandomBytes(rng, 5 * MiB + 100);
  std::memset(data.data() + 1 * MiB, 0, 1 * MiB);  // a hole
  for (uint64_t at = 0; at < data.size(); at += 64 * KiB) {
    if (at >= 1 * MiB && at < 2 * MiB) continue;
    const uint64_t length = std::min<uint64_t>(64 * KiB, data.size() - at);
    ASSERT_TRUE(map.Write(at, data.data() + at, length).ok());
  }
  map.TrimTail(data.size());
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_TRUE(map.shared());
  uint64_t total = 0;
  for (const DeviceRange& range : *ranges) {
    EXPECT_EQ(range.offset % kGranule, 0u);
    EXPECT_EQ(range.length % kGranule, 0u);
    EXPECT_TRUE(device_->Exclusive(range));
    total += range.length;
  }
  EXPECT_EQ(total, 6 * MiB);
  EXPECT_EQ(map.allocated_bytes(), 6 * MiB);
  EXPECT_EQ(Used(), 6 * MiB) << "the small blocks went back";
  const std::string shared = SharedBytes(*device_, *ranges);
  EXPECT_EQ(shared.substr(0, data.size()), data);
  EXPECT_TRUE(AllZero(shared, data.size())) << "past the data";
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
  // Shared again: nothing moves.
  absl::StatusOr<std::vector<DeviceRange>> again = map.Share(data.size());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), ranges->size());
  for (size_t i = 0; i < ranges->size(); ++i) EXPECT_EQ((*again)[i].offset, (*ranges)[i].offset);
}

// Large blocks that are ranges of their own stay where they are.
TEST_F(ExtentMapTest, ShareKeepsLargeBlocksOfTheirOwn) {
  ExtentMap map(SpaceOf(arena_.get(), 4 * MiB));
  std::mt19937_64 rng(22);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());  // two 4 MiB blocks
  const std::vector<DeviceToDevice> before = map.CopiesOut(data.size());
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ((*ranges)[i].offset, before[i].source_offset);
    EXPECT_EQ((*ranges)[i].length, 4 * MiB);
  }
  EXPECT_EQ(SharedBytes(*device_, *ranges), data);
}

// Once shared, blocks are freed only whole: a truncate or punch zeroes
// what it would have split off (a mapping sees it), and TrimTail keeps all.
TEST_F(ExtentMapTest, SharedFilesKeepTheirBlocksWhole) {
  ExtentMap map(SpaceOf(arena_.get(), 4 * MiB));
  std::mt19937_64 rng(23);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 2u);
  ASSERT_TRUE(map.PunchHole(100, 1 * MiB).ok());
  EXPECT_EQ(map.allocated_bytes(), 8 * MiB);
  ASSERT_TRUE(map.Truncate(1 * MiB + 5).ok());
  map.TrimTail(1 * MiB + 5);
  EXPECT_EQ(map.allocated_bytes(), 4 * MiB) << "the whole second block went";
  std::string expected = data.substr(0, 100);  // then punched, then cut off
  expected.resize(4 * MiB, '\0');
  EXPECT_EQ(SharedBytes(*device_, {(*ranges)[0]}), expected);
  // A mapping's write past the end shows once the file grows over it.
  ASSERT_TRUE(device_->Write({{(*ranges)[0].offset + 3 * MiB, "mapped", 6}}).ok());
  EXPECT_EQ(ReadAll(map, 3 * MiB, 6), "mapped");
}

// A punch in a shared file zeroes the blocks it covers whole in place
// rather than freeing them: a mapping of them stays the file's memory, as
// a shared mapping of a tmpfs file stays coherent after a punch. They
// still count as allocated; a truncate frees them.
TEST_F(ExtentMapTest, PunchesZeroASharedFilesWholeBlocksInPlace) {
  ExtentMap map(SpaceOf(arena_.get(), 4 * MiB));
  std::mt19937_64 rng(25);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 2u);
  const DeviceRange second = (*ranges)[1];
  ASSERT_TRUE(map.PunchHole(4 * MiB, 4 * MiB).ok());  // the whole second block
  EXPECT_EQ(map.allocated_bytes(), 8 * MiB);
  EXPECT_EQ(Used(), 8 * MiB);
  EXPECT_TRUE(AllZero(SharedBytes(*device_, {second})));
  EXPECT_TRUE(AllZero(ReadAll(map, 4 * MiB, 4 * MiB)));
  EXPECT_EQ(ReadAll(map, 0, 4 * MiB), data.substr(0, 4 * MiB));
  // Writes on either side still show on the other.
  ASSERT_TRUE(map.Write(5 * MiB, "written", 7).ok());
  EXPECT_EQ(SharedBytes(*device_, {second}).substr(1 * MiB, 7), "written");
  ASSERT_TRUE(device_->Write({{second.offset + 2 * MiB, "mapped", 6}}).ok());
  EXPECT_EQ(ReadAll(map, 6 * MiB, 6), "mapped");
  ASSERT_TRUE(map.Truncate(4 * MiB).ok());
  EXPECT_EQ(map.allocated_bytes(), 4 * MiB);
  EXPECT_EQ(Used(), 4 * MiB);
}

// Without room for the blocks a move needs, nothing changes.
TEST_F(ExtentMapTest, ShareWithoutRoomChangesNothing) {
  MakeArena(4 * MiB);
  ExtentMap map(SpaceOf(arena_.get(), 1 * MiB));
  std::mt19937_64 rng(24);
  const std::string data = RandomBytes(rng, 2 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());  // two 1 MiB blocks
  ExtentMap other(SpaceOf(arena_.get(), 1 * MiB));
  ASSERT_TRUE(other.Write(3 * MiB, "o", 1).ok());  // no free granule left whole
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  EXPECT_TRUE(absl::IsResourceExhausted(ranges.status())) << ranges.status();
  EXPECT_FALSE(map.shared());
  EXPECT_EQ(map.allocated_bytes(), 2 * MiB);
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
}

// Issue 44: small files left after deletes keep the granules they share
// committed; compaction gathers them so that held memory follows used.
TEST_F(ExtentMapTest, CompactionGivesBackTheGranulesThatSurvivorsOfDeletesPinned) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::unique_ptr<ExtentMap>> maps;
  std::vector<std::string> models;
  while (Used() < 48 * MiB) {
    // A word at a time: 48 MiB of the fixture's RandomBytes take a second.
    const std::string data = cudafs::RandomBytes(rng, 1 + rng() % (64 * KiB));
    auto map = std::make_unique<ExtentMap>(SpaceOf(arena_.get(), 1 * MiB));
    ASSERT_TRUE(map->Write(0, data.data(), data.size()).ok());
    map->TrimTail(data.size());  // as the last close does
    maps.push_back(std::move(map));
    models.push_back(data);
  }
  std::vector<size_t> order(maps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < order.size() * 3 / 4; ++i) maps[order[i]].reset();
  const uint64_t granule = device_->granule_size();
  const uint64_t used = Used();
  ASSERT_GT(arena_->Stats().committed_bytes, used + 16 * granule) << "deletes left no gaps";

  uint64_t moved = 0;
  int passes = 0;
  for (CompactionPlan plan; !(plan = arena_->PlanCompaction(4 * MiB)).empty(); ++passes) {
    ASSERT_LT(passes, 100) << "compaction never ends";
    for (const std::unique_ptr<ExtentMap>& map : maps) {
      if (map == nullptr || map->BytesIn(plan) == 0) continue;
      absl::StatusOr<uint64_t> bytes = map->Compact(plan);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      moved += *bytes;
    }
  }
  EXPECT_GT(passes, 1) << "the budget bounds each pass";
  EXPECT_EQ(Used(), used) << "compaction changed the bytes used";
  const uint64_t committed = arena_->Stats().committed_bytes;
  std::printf("used %llu KiB, committed %llu KiB after moving %llu KiB in %d passes\n",
              static_cast<unsigned long long>(used / KiB),
              static_cast<unsigned long long>(committed / KiB),
              static_cast<unsigned long long>(moved / KiB), passes);
  EXPECT_LE(committed, used + std::max(Arena::kCompactionSlackGranules * granule,
                                       used / Arena::kCompactionSlackShare));
  for (size_t i = 0; i < maps.size(); ++i) {
    if (maps[i] == nullptr) continue;
    ASSERT_EQ(ReadAll(*maps[i], 0, models[i].size()), models[i]) << "file " << i;
    EXPECT_EQ(maps[i]->allocated_bytes(),
              (models[i].size() + kMinBlock - 1) / kMinBlock * kMinBlock);
  }
}

// Where the granules being filled have only small holes, a larger block
// moves in halves, down to min_block: the file keeps its bytes in more
// extents, and the granule it left goes back.
TEST_F(ExtentMapTest, CompactionMovesABlockTooLargeForTheHolesInPieces) {
  const uint64_t granule = device_->granule_size();
  // Granules 0 and 1 full but for every other min_block.
  std::vector<Block> filler;
  for (uint64_t i = 0; i < 2 * granule / kMinBlock; ++i) {
    const Block block = arena_->Allocate(kMinBlock).value();
    (i % 2 == 0 ? filler : held_).push_back(block);
  }
  for (const Block& block : filler) arena_->Free(block);
  // Granules 2 to 7: one file of 32 KiB each, alone.
  std::mt19937_64 rng(44);
  std::vector<std::unique_ptr<ExtentMap>> maps;
  std::vector<std::string> models;
  filler.clear();
  for (int i = 0; i < 6; ++i) {
    models.push_back(RandomBytes(rng, 32 * KiB));
    maps.push_back(std::make_unique<ExtentMap>(SpaceOf(arena_.get(), 1 * MiB)));
    const uint64_t blocks = Blocks();
    ASSERT_TRUE(maps.back()->Write(0, models.back().data(), 32 * KiB).ok());
    ASSERT_EQ(Blocks(), blocks + 1) << "one block of 32 KiB";
    while (Used() % granule != 0) filler.push_back(arena_->Allocate(32 * KiB).value());
  }
  for (const Block& block : filler) arena_->Free(block);
  ASSERT_EQ(arena_->Stats().committed_bytes, 8 * granule);

  const CompactionPlan plan = arena_->PlanCompaction(UINT64_MAX);
  ASSERT_EQ(plan.granules(), 6u);
  for (size_t i = 0; i < maps.size(); ++i) {
    ASSERT_EQ(maps[i]->BytesIn(plan), 32 * KiB);
    const uint64_t blocks = Blocks();
    absl::StatusOr<uint64_t> moved = maps[i]->Compact(plan);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_EQ(*moved, 32 * KiB);
    EXPECT_EQ(Blocks(), blocks + 7) << "eight min_blocks where one block was";
    EXPECT_EQ(maps[i]->BytesIn(plan), 0u);
    EXPECT_EQ(ReadAll(*maps[i], 0, 32 * KiB), models[i]);
    EXPECT_EQ(maps[i]->allocated_bytes(), 32 * KiB);
  }
  EXPECT_EQ(arena_->Stats().committed_bytes, 2 * granule);
}

// An arena over two host devices as the GPUs (parts 0 and 1) and a third
// as the spill (part 2).
class SpillTest : public ExtentMapTest {
 protected:
  static constexpr size_t kSpill = 2;
  static constexpr uint64_t kAll = std::numeric_limits<uint64_t>::max();

  void SetUp() override {
    ExtentMapTest::SetUp();
    MakePool(16 * MiB, 16 * MiB);
  }

  void TearDown() override {
    for (const Block& block : pool_held_) pool_arena_->Free(block);
    pool_held_.clear();
    EXPECT_EQ(pool_arena_->Stats().blocks.used, 0u);
    EXPECT_EQ(pool_arena_->Stats().committed_bytes, 0u);
    ExtentMapTest::TearDown();
  }

  void MakePool(uint64_t gpu_bytes, uint64_t spill_bytes,
                uint64_t capacity = std::numeric_limits<uint64_t>::max()) {
    pool_arena_.reset();
    std::vector<std::unique_ptr<Device>> gpus;
    gpus.push_back(HostDevice::Create(gpu_bytes).value());
    gpus.push_back(HostDevice::Create(gpu_bytes).value());
    pool_ = PooledDevice::Create(std::move(gpus), HostDevice::Create(spill_bytes).value()).value();
    pool_arena_ = std::make_unique<Arena>(pool_.get(), kMinBlock, capacity);
    ASSERT_TRUE(pool_arena_->IsSpillPart(kSpill));
  }

  static bool Gpus(size_t part) { return part != kSpill; }
  static bool Spill(size_t part) { return part == kSpill; }

  uint64_t PoolUsed() const { return pool_arena_->Stats().blocks.used; }

  // Leaves dirt in every free byte of `part`, holding one min_block at the
  // end of each granule so that none is decommitted (which would zero it).
  void DirtyPart(size_t part) {
    std::vector<Block> blocks;
    for (absl::StatusOr<Block> block = pool_arena_->AllocateForMove(kMinBlock, {part});
         block.ok(); block = pool_arena_->AllocateForMove(kMinBlock, {part})) {
      blocks.push_back(*block);
    }
    const std::string dirt(kMinBlock, kDirt);
    std::vector<HostToDevice> copies;
    for (const Block& block : blocks) copies.push_back({block.offset, dirt.data(), block.size});
    ASSERT_TRUE(pool_->Write(copies).ok());
    for (const Block& block : blocks) {
      if (block.offset % HostDevice::kGranule == HostDevice::kGranule - kMinBlock) {
        pool_held_.push_back(block);
      } else {
        pool_arena_->Free(block);
      }
    }
  }

  // Takes every free granule of `part` (the other parts keep their room).
  void Fill(size_t part) {
    for (absl::StatusOr<Block> block = pool_arena_->AllocateForMove(kMinBlock, {part});
         block.ok(); block = pool_arena_->AllocateForMove(kMinBlock, {part})) {
      pool_held_.push_back(*block);
    }
  }

  // The part of each mapped run of the first `size` bytes, in file order.
  std::vector<size_t> PartsInFileOrder(const ExtentMap& map, uint64_t size) const {
    std::vector<size_t> parts;
    for (const DeviceToDevice& copy : map.CopiesOut(size)) {
      parts.push_back(pool_arena_->PartOf(copy.source_offset));
    }
    return parts;
  }

  // Where data and holes lie, as NextData / NextHole see them up to `end`.
  static std::vector<uint64_t> Layout(const ExtentMap& map, uint64_t end) {
    std::vector<uint64_t> edges;
    for (uint64_t at = 0; at < end;) {
      const std::optional<uint64_t> data = map.NextData(at);
      if (!data) break;
      edges.push_back(*data);
      at = map.NextHole(*data);
      edges.push_back(at);
    }
    return edges;
  }

  // Writes `model` (over 2 MiB) into `map`: its first 2 MiB at once (two
  // max_extent blocks of 1 MiB, one in each GPU), the rest in pieces of
  // random lengths, leaving some out (holes); then punches a hole inside.
  // Blocks of many sizes.
  void WriteWithHoles(ExtentMap& map, std::string& model, std::mt19937_64& rng) {
    ASSERT_TRUE(map.Write(0, model.data(), 2 * MiB).ok());
    for (uint64_t at = 2 * MiB; at < model.size();) {
      const uint64_t length = std::min<uint64_t>(1 + rng() % (300 * KiB), model.size() - at);
      if (rng() % 5 == 0 && at + length < model.size()) {
        std::fill(model.begin() + at, model.begin() + at + length, '\0');
      } else {
        ASSERT_TRUE(map.Write(at, model.data() + at, length).ok());
      }
      at += length;
    }
    const uint64_t punch = model.size() / 2 + 5;
    ASSERT_TRUE(map.PunchHole(punch, 200 * KiB).ok());
    std::fill(model.begin() + punch, model.begin() + punch + 200 * KiB, '\0');
  }

  std::unique_ptr<PooledDevice> pool_;
  std::unique_ptr<Arena> pool_arena_;
  std::vector<Block> pool_held_;
};

TEST_F(SpillTest, LargeFilesGoRoundTheGpusButNotTheSpill) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::mt19937_64 rng(41);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(map.BytesIn(0), 4 * MiB);
  EXPECT_EQ(map.BytesIn(1), 4 * MiB);
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
}

// Once both GPUs are full a file grows into the spill; it still starts in
// a GPU.
TEST_F(SpillTest, FilesGrowIntoTheSpillOnlyOnceTheGpusAreFull) {
  Fill(0);
  Fill(1);
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::mt19937_64 rng(42);
  const std::string data = RandomBytes(rng, 3 * MiB + 5);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  EXPECT_EQ(map.BytesIn(kSpill), map.allocated_bytes());
  EXPECT_EQ(ReadAll(map, 0, data.size()), data);
  pool_arena_->Free(pool_held_.back());
  pool_held_.pop_back();
  ExtentMap next(SpaceOf(pool_arena_.get(), 1 * MiB));
  ASSERT_TRUE(next.Write(0, "n", 1).ok());
  EXPECT_EQ(next.BytesIn(1), kMinBlock) << "the room freed in a GPU comes first";
}

// Everything moves to the spill: the bytes, holes and extents stay as they
// were, the arena's use too, and the GPUs hold no memory any more.
TEST_F(SpillTest, MovingAFileToTheSpillKeepsItsBytesAndFreesTheGpus) {
  DirtyPart(kSpill);
  const uint64_t seed = TestSeed(43);
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::string model = RandomBytes(rng, 5 * MiB + 1234);
  ASSERT_NO_FATAL_FAILURE(WriteWithHoles(map, model, rng));
  map.TrimTail(model.size());
  ASSERT_GT(map.BytesIn(0), 0u);
  ASSERT_GT(map.BytesIn(1), 0u);
  ASSERT_EQ(map.BytesIn(kSpill), 0u);
  const uint64_t allocated = map.allocated_bytes();
  const size_t extents = Blocks();
  const uint64_t used = PoolUsed();
  const std::vector<uint64_t> layout = Layout(map, model.size() + MiB);
  const std::string before = ReadAll(map, 0, model.size() + 64 * KiB);
  ASSERT_EQ(before, model + std::string(64 * KiB, '\0'));

  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, allocated);
  EXPECT_EQ(map.BytesIn(kSpill), allocated);
  EXPECT_EQ(map.BytesIn(0), 0u);
  EXPECT_EQ(map.BytesIn(1), 0u);
  EXPECT_EQ(map.allocated_bytes(), allocated);
  EXPECT_EQ(Blocks(), extents);
  EXPECT_EQ(Layout(map, model.size() + MiB), layout);
  EXPECT_EQ(PoolUsed(), used);
  EXPECT_TRUE(ReadAll(map, 0, before.size()) == before);
  const ArenaStats stats = pool_arena_->Stats();
  for (size_t gpu : {size_t{0}, size_t{1}}) {
    EXPECT_EQ(stats.parts[gpu].used, 0u) << gpu;
    EXPECT_EQ(stats.parts[gpu].committed_bytes, 0u) << "GPU " << gpu << " still holds memory";
  }
  absl::StatusOr<uint64_t> again = map.Move(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0u);
  EXPECT_TRUE(ReadAll(map, 0, before.size()) == before);
}

TEST_F(SpillTest, MoveTakesWholeBlocksInFileOrderUntilTheBudget) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::mt19937_64 rng(44);
  const std::string data = RandomBytes(rng, 4 * MiB + 4 * KiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  map.TrimTail(data.size());
  const std::vector<size_t> home = PartsInFileOrder(map, data.size());
  ASSERT_EQ(home.size(), 5u);  // four of 1 MiB, then 4 KiB
  ASSERT_NE(home[0], home[1]) << "the 1 MiB blocks go round the GPUs";
  const auto expect_parts = [&](std::vector<size_t> expected) {
    EXPECT_EQ(PartsInFileOrder(map, data.size()), expected);
    EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
  };

  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, 0);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 0u);
  expect_parts(home);
  moved = map.Move(Gpus, {kSpill}, 1);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 1 * MiB) << "a whole block";
  expect_parts({kSpill, home[1], home[2], home[3], home[4]});
  moved = map.Move(Gpus, {kSpill}, 1 * MiB + 1);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 2 * MiB);
  expect_parts({kSpill, kSpill, kSpill, home[3], home[4]});
  EXPECT_EQ(map.BytesIn(kSpill), 3 * MiB);
  // Only what `leave` names moves.
  const size_t other = home[4] == 0 ? 1 : 0;
  moved = map.Move([&](size_t part) { return part == other; }, {kSpill}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, home[3] == other ? 1 * MiB : 0);
  moved = map.Move(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, home[3] == other ? 4 * KiB : 1 * MiB + 4 * KiB);
  expect_parts({kSpill, kSpill, kSpill, kSpill, kSpill});
  EXPECT_EQ(map.BytesIn(kSpill), map.allocated_bytes());
  EXPECT_EQ(PoolUsed(), map.allocated_bytes());
}

// A move in two steps: the copy, then its blocks put in place. A file
// that changed in between (a write, a truncate, a mapping) keeps its
// blocks and bytes, and the copy's blocks go back; so do those of a
// prepared move dropped unfinished.
TEST_F(SpillTest, APreparedMoveLandsOnlyOnTheFileItCopied) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::mt19937_64 rng(46);
  std::string data = RandomBytes(rng, 3 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  map.TrimTail(data.size());
  ASSERT_EQ(PoolUsed(), map.allocated_bytes());

  using Change = std::function<void()>;
  const std::vector<std::pair<std::string, Change>> changes = {
      {"write", [&] {
         data[5] = static_cast<char>(data[5] + 1);
         ASSERT_TRUE(map.Write(5, &data[5], 1).ok());
       }},
      {"truncate", [&] {
         data.resize(data.size() - 3);
         ASSERT_TRUE(map.Truncate(data.size()).ok());
       }},
      {"punched hole", [&] {
         std::fill(data.begin(), data.begin() + 4096, '\0');
         ASSERT_TRUE(map.PunchHole(0, 4096).ok());
       }},
      {"nothing, the move dropped", nullptr},
  };
  for (const auto& [name, change] : changes) {
    SCOPED_TRACE(name);
    std::vector<size_t> parts = PartsInFileOrder(map, data.size());
    {
      absl::StatusOr<ExtentMap::PreparedMove> move = map.PrepareMove(Gpus, {kSpill}, kAll);
      ASSERT_TRUE(move.ok()) << move.status();
      EXPECT_EQ(move->bytes(), map.allocated_bytes());
      EXPECT_EQ(PoolUsed(), 2 * map.allocated_bytes()) << "the copy holds blocks of its own";
      if (change != nullptr) {
        change();
        parts = PartsInFileOrder(map, data.size());
        EXPECT_EQ(map.FinishMove(*std::move(move)), 0u) << "the file changed under the copy";
      }
    }
    EXPECT_EQ(PartsInFileOrder(map, data.size()), parts);
    EXPECT_EQ(map.BytesIn(kSpill), 0u);
    EXPECT_EQ(PoolUsed(), map.allocated_bytes()) << "the copy's blocks went back";
    EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
  }

  absl::StatusOr<ExtentMap::PreparedMove> move = map.PrepareMove(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(move.ok()) << move.status();
  move = map.PrepareMove(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(move.ok()) << move.status();
  EXPECT_EQ(PoolUsed(), 2 * map.allocated_bytes()) << "the move assigned over gave its blocks back";
  const uint64_t bytes = move->bytes();
  EXPECT_EQ(map.FinishMove(*std::move(move)), bytes);
  EXPECT_EQ(map.BytesIn(kSpill), map.allocated_bytes());
  EXPECT_EQ(PoolUsed(), map.allocated_bytes());
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
}

TEST_F(SpillTest, ASharedFileNeverMoves) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 4 * MiB));
  std::mt19937_64 rng(45);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  const std::vector<size_t> parts = PartsInFileOrder(map, data.size());
  const uint64_t used = PoolUsed();
  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, kAll);
  EXPECT_TRUE(absl::IsFailedPrecondition(moved.status())) << moved.status();
  EXPECT_EQ(PartsInFileOrder(map, data.size()), parts);
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(PoolUsed(), used);
  EXPECT_EQ(SharedBytes(*pool_, *ranges), data);
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
}

// Back from the spill into the first GPU given that has room, and from one
// GPU to the other.
TEST_F(SpillTest, MovingBackRestoresTheFile) {
  DirtyPart(0);
  DirtyPart(1);
  const uint64_t held = PoolUsed();
  std::mt19937_64 rng(46);
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::string model = RandomBytes(rng, 3 * MiB + 100);
  ASSERT_NO_FATAL_FAILURE(WriteWithHoles(map, model, rng));
  const uint64_t allocated = map.allocated_bytes();
  ASSERT_TRUE(map.Move(Gpus, {kSpill}, kAll).ok());
  ASSERT_EQ(map.BytesIn(kSpill), allocated);

  const size_t dirt = pool_held_.size();
  Fill(0);
  absl::StatusOr<uint64_t> moved = map.Move(Spill, {0, 1}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, allocated);
  EXPECT_EQ(map.BytesIn(1), allocated) << "GPU 0 is full";
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_TRUE(ReadAll(map, 0, model.size()) == model);

  for (size_t i = dirt; i < pool_held_.size(); ++i) pool_arena_->Free(pool_held_[i]);
  pool_held_.resize(dirt);
  moved = map.Move([](size_t part) { return part == 1; }, {0}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, allocated);
  EXPECT_EQ(map.BytesIn(0), allocated);
  EXPECT_TRUE(ReadAll(map, 0, model.size() + 64 * KiB) == model + std::string(64 * KiB, '\0'));
  EXPECT_EQ(PoolUsed(), held + allocated);
}

// A mapping gets GPU memory: blocks in the spill, large ones too, come
// back to a GPU, with the file's bytes.
TEST_F(SpillTest, ShareBringsASpilledFileBackToTheGpus) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 4 * MiB));
  std::mt19937_64 rng(47);
  const std::string data = RandomBytes(rng, 8 * MiB + 100 * KiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  map.TrimTail(data.size());
  ASSERT_TRUE(map.Move(Gpus, {kSpill}, kAll).ok());
  ASSERT_EQ(map.BytesIn(kSpill), map.allocated_bytes());

  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  uint64_t total = 0;
  for (const DeviceRange& range : *ranges) {
    const size_t part = pool_arena_->PartOf(range.offset);
    EXPECT_NE(part, kSpill) << "range at " << range.offset;
    EXPECT_EQ(pool_arena_->PartOf(range.offset + range.length - 1), part);
    EXPECT_TRUE(pool_->Exclusive(range));
    total += range.length;
  }
  EXPECT_EQ(total, 10 * MiB);
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(map.allocated_bytes(), total);
  EXPECT_EQ(PoolUsed(), total) << "the spilled blocks went back";
  const std::string shared = SharedBytes(*pool_, *ranges);
  EXPECT_TRUE(shared.substr(0, data.size()) == data);
  EXPECT_TRUE(AllZero(shared, data.size()));
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
}

// Only the spilled blocks move for a mapping: a large block in a GPU is
// kept where it is.
TEST_F(SpillTest, ShareKeepsTheBlocksInAGpuAndBringsBackTheSpilledOnes) {
  ExtentMap map(SpaceOf(pool_arena_.get(), 4 * MiB));
  std::mt19937_64 rng(51);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  const std::vector<DeviceToDevice> before = map.CopiesOut(data.size());
  ASSERT_EQ(before.size(), 2u);
  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, 1);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(*moved, 4 * MiB);

  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_NE(pool_arena_->PartOf((*ranges)[0].offset), kSpill);
  EXPECT_EQ((*ranges)[0].length, 4 * MiB);
  EXPECT_EQ((*ranges)[1].offset, before[1].source_offset) << "the GPU's block moved";
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(PoolUsed(), 8 * MiB);
  EXPECT_EQ(SharedBytes(*pool_, *ranges), data);
}

// A spilled file comes back to a GPU for a mapping as a move does: the
// new blocks take the old ones' place, so a full mount has room for them.
TEST_F(SpillTest, ShareBringsASpilledFileBackEvenWhenTheMountIsFull) {
  MakePool(16 * MiB, 16 * MiB, /*capacity=*/8 * MiB);
  ExtentMap map(SpaceOf(pool_arena_.get(), 4 * MiB));
  std::mt19937_64 rng(48);
  const std::string data = RandomBytes(rng, 8 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  ASSERT_EQ(pool_arena_->Stats().blocks.free, 0u);
  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(*moved, 8 * MiB);

  absl::StatusOr<std::vector<DeviceRange>> ranges = map.Share(data.size());
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(SharedBytes(*pool_, *ranges), data);
  EXPECT_EQ(PoolUsed(), 8 * MiB);
}

TEST_F(SpillTest, MoveWithoutRoomChangesNothing) {
  MakePool(16 * MiB, 2 * MiB);
  ExtentMap map(SpaceOf(pool_arena_.get(), 1 * MiB));
  std::mt19937_64 rng(49);
  const std::string data = RandomBytes(rng, 4 * MiB);
  ASSERT_TRUE(map.Write(0, data.data(), data.size()).ok());
  const std::vector<size_t> parts = PartsInFileOrder(map, data.size());
  const uint64_t used = PoolUsed();
  Fill(kSpill);

  absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, kAll);
  EXPECT_TRUE(absl::IsResourceExhausted(moved.status())) << moved.status();
  EXPECT_EQ(PartsInFileOrder(map, data.size()), parts);
  EXPECT_EQ(map.BytesIn(kSpill), 0u);
  EXPECT_EQ(map.allocated_bytes(), 4 * MiB);
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
  EXPECT_EQ(pool_arena_->Stats().parts[kSpill].used, 2 * MiB);
  EXPECT_EQ(PoolUsed() - 2 * MiB, used);

  // Room for one block: it moves, the first in file order, and Move says
  // how much; the next finds none.
  for (Block& block : pool_held_) pool_arena_->Free(block);
  pool_held_.clear();
  absl::StatusOr<Block> half = pool_arena_->AllocateForMove(1 * MiB, {kSpill});
  ASSERT_TRUE(half.ok()) << half.status();
  pool_held_.push_back(*half);
  moved = map.Move(Gpus, {kSpill}, kAll);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 1 * MiB);
  EXPECT_EQ(PartsInFileOrder(map, data.size()),
            (std::vector<size_t>{kSpill, parts[1], parts[2], parts[3]}));
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
  moved = map.Move(Gpus, {kSpill}, kAll);
  EXPECT_TRUE(absl::IsResourceExhausted(moved.status())) << moved.status();
  EXPECT_TRUE(ReadAll(map, 0, data.size()) == data);
}

// Random writes, punches, truncates and trims interleaved with moves to
// the spill and back, against a std::string model, on dirty parts.
TEST_F(SpillTest, RandomizedWithMovesAgainstModel) {
  MakePool(8 * MiB, 8 * MiB);
  for (size_t part = 0; part < 3; ++part) DirtyPart(part);
  const uint64_t held = PoolUsed();
  constexpr uint64_t kCap = 2 * MiB;
  constexpr uint64_t kMaxExtent = 256 * KiB;
  const uint64_t seed = TestSeed(50);
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  {
    ExtentMap map(SpaceOf(pool_arena_.get(), kMaxExtent));
    std::string model(kCap, '\0');
    uint64_t size = 0;
    const auto random_range = [&](uint64_t* offset, uint64_t* length) {
      *length = 1 + rng() % (rng() % 2 ? 8 * KiB : 300 * KiB);
      *offset = rng() % (kCap - *length + 1);
    };
    const auto gpu_bytes = [&] { return map.BytesIn(0) + map.BytesIn(1); };
    int moves = 0;
    for (int op = 0; op < Scaled(2000); ++op) {
      SCOPED_TRACE(op);
      uint64_t offset, length;
      random_range(&offset, &length);
      const int kind = rng() % 20;
      if (kind < 8) {
        const std::string data = RandomBytes(rng, length);
        ASSERT_TRUE(map.Write(offset, data.data(), length).ok());
        model.replace(offset, length, data);
        size = std::max(size, offset + length);
      } else if (kind < 10) {
        ASSERT_TRUE(map.PunchHole(offset, length).ok());
        std::fill(model.begin() + offset, model.begin() + offset + length, '\0');
      } else if (kind < 11) {
        size = std::min(size, offset);
        ASSERT_TRUE(map.Truncate(size).ok());
        std::fill(model.begin() + size, model.end(), '\0');
      } else if (kind < 12) {
        map.TrimTail(size);
      } else if (kind < 16) {
        const uint64_t budget = rng() % 3 == 0 ? kAll : rng() % (1 * MiB);
        const uint64_t before = gpu_bytes();
        const uint64_t spill_before = map.BytesIn(kSpill);
        absl::StatusOr<uint64_t> moved = map.Move(Gpus, {kSpill}, budget);
        ASSERT_TRUE(moved.ok()) << moved.status();
        if (before <= budget) {
          EXPECT_EQ(*moved, before);
        } else {
          EXPECT_GE(*moved, budget);
          EXPECT_LT(*moved, budget + kMaxExtent);
        }
        EXPECT_EQ(map.BytesIn(kSpill), spill_before + *moved);
        moves += *moved > 0;
      } else {
        const uint64_t budget = rng() % 3 == 0 ? kAll : rng() % (1 * MiB);
        const uint64_t before = map.BytesIn(kSpill);
        const std::vector<size_t> to = rng() % 2 ? std::vector<size_t>{0, 1}
                                                 : std::vector<size_t>{1, 0};
        absl::StatusOr<uint64_t> moved = map.Move(Spill, to, budget);
        ASSERT_TRUE(moved.ok()) << moved.status();
        EXPECT_EQ(map.BytesIn(kSpill), before - *moved);
        EXPECT_GE(*moved, std::min(before, budget));
        moves += *moved > 0;
      }
      ASSERT_EQ(map.BytesIn(0) + map.BytesIn(1) + map.BytesIn(kSpill), map.allocated_bytes());
      ASSERT_EQ(map.allocated_bytes(), PoolUsed() - held);
      uint64_t o, l;
      random_range(&o, &l);
      ASSERT_TRUE(ReadAll(map, o, l) == model.substr(o, l));
      if (op % 16 == 0) {
        ASSERT_TRUE(ReadAll(map, 0, kCap) == model);
      }
    }
    ASSERT_TRUE(ReadAll(map, 0, kCap) == model);
    EXPECT_GT(moves, Scaled(2000) / 20);
  }
  EXPECT_EQ(PoolUsed(), held);
}

}  // namespace
}  // namespace cudafs
