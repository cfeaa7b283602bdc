#include "alloc/storage/extent_set.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "alloc/storage/arena.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uint64_t kMinBlock = 4096;

Block BlockAt(uint64_t offset, uint64_t size = kMinBlock) { return Block{offset, size}; }

// The starts in iteration order, forward.
std::vector<uint64_t> Starts(const ExtentSet& set) {
  std::vector<uint64_t> starts;
  for (const Extent& extent : set) starts.push_back(extent.start);
  return starts;
}

// The starts in iteration order, backward from end().
std::vector<uint64_t> StartsBackward(const ExtentSet& set) {
  std::vector<uint64_t> starts;
  for (auto it = set.end(); it != set.begin();) starts.push_back((--it)->start);
  return starts;
}

TEST(ExtentSetTest, EmptyHasNothing) {
  ExtentSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.bytes(), 0u);
  EXPECT_TRUE(set.begin() == set.end());
  EXPECT_TRUE(set.find(0) == set.end());
  EXPECT_TRUE(set.lower_bound(0) == set.end());
  EXPECT_TRUE(set.upper_bound(0) == set.end());
}

TEST(ExtentSetTest, OneExtentInPlace) {
  ExtentSet set;
  set.emplace(8 * kMinBlock, BlockAt(3 * kMinBlock, 2 * kMinBlock));
  EXPECT_FALSE(set.empty());
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.bytes(), 2 * kMinBlock);

  auto it = set.begin();
  ASSERT_FALSE(it == set.end());
  EXPECT_EQ(it->start, 8 * kMinBlock);
  EXPECT_EQ(it->block.offset, 3 * kMinBlock);
  EXPECT_EQ((*it).block.size, 2 * kMinBlock);
  EXPECT_TRUE(++it == set.end());
  EXPECT_TRUE(--it == set.begin());

  EXPECT_TRUE(set.find(8 * kMinBlock) == set.begin());
  EXPECT_TRUE(set.find(8 * kMinBlock + 1) == set.end());
  EXPECT_TRUE(set.find(0) == set.end());
  EXPECT_EQ(set.at(8 * kMinBlock).offset, 3 * kMinBlock);

  EXPECT_TRUE(set.lower_bound(0) == set.begin());
  EXPECT_TRUE(set.lower_bound(8 * kMinBlock) == set.begin());
  EXPECT_TRUE(set.lower_bound(8 * kMinBlock + 1) == set.end());
  EXPECT_TRUE(set.upper_bound(8 * kMinBlock - 1) == set.begin());
  EXPECT_TRUE(set.upper_bound(8 * kMinBlock) == set.end());
}

TEST(ExtentSetTest, EmplaceKeepsTheExtentAlreadyAtAStart) {
  ExtentSet set;
  set.emplace(0, BlockAt(kMinBlock));
  set.emplace(0, BlockAt(5 * kMinBlock, 4 * kMinBlock));  // in place
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.bytes(), kMinBlock);
  EXPECT_EQ(set.at(0).offset, kMinBlock);

  set.emplace(kMinBlock, BlockAt(2 * kMinBlock));
  set.emplace(kMinBlock, BlockAt(9 * kMinBlock, 8 * kMinBlock));  // in the tree
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.bytes(), 2 * kMinBlock);
  EXPECT_EQ(set.at(kMinBlock).offset, 2 * kMinBlock);
}

TEST(ExtentSetTest, GrowsIntoTreeAtTheSecond) {
  ExtentSet set;
  set.emplace(4 * kMinBlock, BlockAt(0, 4 * kMinBlock));
  set.emplace(0, BlockAt(4 * kMinBlock, 2 * kMinBlock));  // before the one in place
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.bytes(), 6 * kMinBlock);
  EXPECT_EQ(Starts(set), (std::vector<uint64_t>{0, 4 * kMinBlock}));
  EXPECT_EQ(set.at(0).offset, 4 * kMinBlock);
  EXPECT_EQ(set.at(4 * kMinBlock).offset, 0u);

  set.emplace(8 * kMinBlock, BlockAt(8 * kMinBlock));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(set.bytes(), 7 * kMinBlock);
  EXPECT_EQ(Starts(set), (std::vector<uint64_t>{0, 4 * kMinBlock, 8 * kMinBlock}));
}

TEST(ExtentSetTest, EraseBackDownToOneAndToNone) {
  ExtentSet set;
  for (uint64_t i = 0; i < 3; ++i) set.emplace(i * kMinBlock, BlockAt(i * kMinBlock));

  // Three to two: the next is the one after.
  auto next = set.erase(set.find(kMinBlock));
  ASSERT_FALSE(next == set.end());
  EXPECT_EQ(next->start, 2 * kMinBlock);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.bytes(), 2 * kMinBlock);

  // Two to one in place, erasing the first: the next is the one left.
  next = set.erase(set.begin());
  ASSERT_FALSE(next == set.end());
  EXPECT_TRUE(next == set.begin());
  EXPECT_EQ(next->start, 2 * kMinBlock);
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.bytes(), kMinBlock);

  // Two to one in place, erasing the last: the next is end().
  set.emplace(0, BlockAt(0));
  next = set.erase(set.find(2 * kMinBlock));
  EXPECT_TRUE(next == set.end());
  EXPECT_EQ(Starts(set), (std::vector<uint64_t>{0}));
  EXPECT_EQ(set.bytes(), kMinBlock);

  // One to none.
  next = set.erase(set.begin());
  EXPECT_TRUE(next == set.end());
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.bytes(), 0u);
  EXPECT_TRUE(set.begin() == set.end());

  // And back up again from empty.
  set.emplace(kMinBlock, BlockAt(0));
  set.emplace(0, BlockAt(kMinBlock));
  EXPECT_EQ(Starts(set), (std::vector<uint64_t>{0, kMinBlock}));
}

TEST(ExtentSetTest, IteratesInOrderOfStart) {
  ExtentSet set;
  std::vector<uint64_t> starts;
  for (uint64_t i = 0; i < 200; ++i) starts.push_back(i * kMinBlock);
  std::vector<uint64_t> shuffled = starts;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  for (uint64_t start : shuffled) set.emplace(start, BlockAt(start));

  EXPECT_EQ(Starts(set), starts);
  EXPECT_EQ(StartsBackward(set), std::vector<uint64_t>(starts.rbegin(), starts.rend()));
  EXPECT_EQ(std::distance(set.begin(), set.end()), 200);
  EXPECT_EQ(set.bytes(), 200 * kMinBlock);
}

TEST(ExtentSetTest, LooksUpByOffset) {
  ExtentSet set;
  for (uint64_t start : {uint64_t{0}, 4 * kMinBlock, 16 * kMinBlock}) {
    set.emplace(start, BlockAt(start));
  }

  EXPECT_EQ(set.find(4 * kMinBlock)->start, 4 * kMinBlock);
  EXPECT_TRUE(set.find(4 * kMinBlock + 1) == set.end());
  EXPECT_EQ(set.lower_bound(1)->start, 4 * kMinBlock);
  EXPECT_EQ(set.lower_bound(4 * kMinBlock)->start, 4 * kMinBlock);
  EXPECT_TRUE(set.lower_bound(16 * kMinBlock + 1) == set.end());
  EXPECT_EQ(set.upper_bound(4 * kMinBlock)->start, 16 * kMinBlock);
  EXPECT_TRUE(set.upper_bound(16 * kMinBlock) == set.end());
  // The extent at or before an offset, as ExtentMap finds the one holding it.
  EXPECT_EQ(std::prev(set.upper_bound(5 * kMinBlock))->start, 4 * kMinBlock);
  EXPECT_EQ(std::prev(set.upper_bound(~uint64_t{0}))->start, 16 * kMinBlock);
  EXPECT_TRUE(set.upper_bound(0) != set.begin());
}

// Iterators are invalidated by any change, but erase returns a valid next:
// erasing as one walks visits every extent, across the tree's fold back into
// the extent in place.
TEST(ExtentSetTest, EraseReturnsTheNextThroughEveryForm) {
  ExtentSet set;
  for (uint64_t i = 0; i < 5; ++i) set.emplace(i * kMinBlock, BlockAt(i * kMinBlock));
  std::vector<uint64_t> seen;
  for (auto it = set.begin(); it != set.end(); it = set.erase(it)) seen.push_back(it->start);
  EXPECT_EQ(seen,
            (std::vector<uint64_t>{0, kMinBlock, 2 * kMinBlock, 3 * kMinBlock, 4 * kMinBlock}));
  EXPECT_TRUE(set.empty());

  // Erasing every other one, keeping the rest: again across the fold.
  for (uint64_t i = 0; i < 4; ++i) set.emplace(i * kMinBlock, BlockAt(i * kMinBlock));
  for (auto it = set.begin(); it != set.end();) {
    it = it->start % (2 * kMinBlock) == 0 ? set.erase(it) : std::next(it);
  }
  EXPECT_EQ(Starts(set), (std::vector<uint64_t>{kMinBlock, 3 * kMinBlock}));
  auto it = set.erase(set.begin());
  EXPECT_EQ(it->start, 3 * kMinBlock);
  EXPECT_TRUE(std::next(it) == set.end());
}

// Random emplaces, erases and lookups against a std::map, on few enough
// starts that the set keeps passing through empty, one and the tree.
TEST(ExtentSetTest, MatchesAMapUnderRandomOperations) {
  std::mt19937_64 rng(33);
  constexpr uint64_t kStarts = 24;
  auto random_start = [&] { return rng() % kStarts * kMinBlock; };
  ExtentSet set;
  std::map<uint64_t, Block> model;
  uint64_t model_bytes = 0;
  size_t seen_empty = 0, seen_one = 0, seen_tree = 0;

  auto same = [&](ExtentSet::const_iterator it, std::map<uint64_t, Block>::const_iterator m) {
    if (m == model.end()) return it == set.end();
    return it != set.end() && it->start == m->first && it->block.offset == m->second.offset &&
           it->block.size == m->second.size;
  };

  for (int step = 0; step < 5000; ++step) {
    SCOPED_TRACE(step);
    // Phases that fill and drain, so the size crosses 0, 1 and 2 often.
    const bool filling = step / 250 % 2 == 0;
    const uint64_t roll = rng() % 10;
    if (roll < (filling ? 5u : 2u)) {
      const uint64_t start = random_start();
      const Block block = BlockAt(rng() % 1024 * kMinBlock, kMinBlock << (rng() % 4));
      set.emplace(start, block);
      if (model.emplace(start, block).second) model_bytes += block.size;
    } else if (roll < 8) {
      const uint64_t offset = random_start() + rng() % 2;  // a start, or just past one
      auto it = set.lower_bound(offset);
      auto m = model.lower_bound(offset);
      ASSERT_TRUE(same(it, m));
      if (m == model.end()) continue;
      model_bytes -= m->second.size;
      m = model.erase(m);
      ASSERT_TRUE(same(set.erase(it), m));
    } else {
      const uint64_t offset = random_start() + rng() % 2;
      ASSERT_TRUE(same(set.find(offset), model.find(offset)));
      ASSERT_TRUE(same(set.lower_bound(offset), model.lower_bound(offset)));
      ASSERT_TRUE(same(set.upper_bound(offset), model.upper_bound(offset)));
      if (auto m = model.find(offset); m != model.end()) {
        EXPECT_EQ(set.at(offset).offset, m->second.offset);
      }
    }

    ASSERT_EQ(set.size(), model.size());
    ASSERT_EQ(set.empty(), model.empty());
    ASSERT_EQ(set.bytes(), model_bytes);
    (model.empty() ? seen_empty : model.size() == 1 ? seen_one : seen_tree)++;
    if (step % 50 == 0) {
      std::vector<uint64_t> starts;
      for (const auto& [start, block] : model) starts.push_back(start);
      ASSERT_EQ(Starts(set), starts);
      ASSERT_EQ(StartsBackward(set), std::vector<uint64_t>(starts.rbegin(), starts.rend()));
    }
  }
  EXPECT_GT(seen_empty, 0u);
  EXPECT_GT(seen_one, 0u);
  EXPECT_GT(seen_tree, 0u);
}

}  // namespace
}  // namespace cudafs
