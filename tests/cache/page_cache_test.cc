// The write-back page cache (cache/page_cache.h), tested through CachedFile,
// its only user: small writes stay in the cache until a flush, a flush puts
// them in the arena in one batch of coalesced copies, reads and writes of
// every size and alignment agree with a model of each file whatever is
// cached or dirty, the cache never holds more than its budget (a write goes
// around it when no frame can be had), ENOSPC comes at write time and never
// at flush time, and a failing device leaves pages dirty and other files
// intact.
//
// The tests keep each file's size themselves, as the filesystem core does:
// reads are clamped to the size, a write is told the size before it, and
// Truncate is only called to shrink a file.
//
// CUDAFS_TEST_SEED overrides the seed of the randomized tests (printed on
// failure).
#include "cache/page_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "cache/cached_file.h"
#include "gtest/gtest.h"
#include "tests/support/arena_dirt.h"
#include "tests/support/recording_device.h"
#include "tests/support/test_seed.h"
#include "tests/support/test_scale.h"

namespace cudafs {
namespace {

constexpr uint64_t kPage = PageCache::kPageSize;
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t kMinBlock = 4 * KiB;
constexpr uint64_t kMaxExtent = 1 * MiB;
constexpr char kDirt = static_cast<char>(0xAA);

// The randomized tests' seed: fixed, unless CUDAFS_TEST_SEED says otherwise.
uint64_t Seed() { return TestSeed(20250611); }

// A file under test: its CachedFile and what every read of it must return.
// content.size() is the file size, kept here as the filesystem keeps it.
struct TestFile {
  std::unique_ptr<CachedFile> data;
  std::string content;
};

std::string Letters(std::mt19937_64& rng, size_t length) {
  std::string s(length, '\0');
  // Never 0 (a hole) nor kDirt (stale arena bytes), so either shows.
  for (size_t i = 0; i < length; i += 8) {
    uint64_t bits = rng();
    for (size_t j = i; j < std::min(length, i + 8); ++j, bits >>= 8) {
      s[j] = static_cast<char>('a' + (bits & 0xFF) % 26);
    }
  }
  return s;
}

// The filesystem core's calls, with the model kept alongside.

absl::Status Write(TestFile& file, uint64_t offset, const std::string& bytes) {
  absl::Status status = file.data->Write(offset, bytes.data(), bytes.size(), file.content.size());
  if (status.ok()) {
    if (file.content.size() < offset + bytes.size()) file.content.resize(offset + bytes.size());
    file.content.replace(offset, bytes.size(), bytes);
  }
  return status;
}

// setattr(size): the data is told only when the file shrinks.
absl::Status Truncate(TestFile& file, uint64_t size) {
  if (size < file.content.size()) {
    if (absl::Status status = file.data->Truncate(size); !status.ok()) return status;
  }
  file.content.resize(size, '\0');
  return absl::OkStatus();
}

// fallocate(PUNCH_HOLE | KEEP_SIZE): clamped to the size.
absl::Status PunchHole(TestFile& file, uint64_t offset, uint64_t length) {
  if (offset >= file.content.size()) return absl::OkStatus();
  const uint64_t end = std::min<uint64_t>(offset + length, file.content.size());
  if (absl::Status status = file.data->PunchHole(offset, end - offset); !status.ok()) {
    return status;
  }
  std::fill(file.content.begin() + offset, file.content.begin() + end, '\0');
  return absl::OkStatus();
}

// copy_file_range: clamped to the source's size.
absl::Status Copy(TestFile& from, uint64_t in_offset, TestFile& to, uint64_t out_offset,
                  uint64_t length) {
  if (in_offset >= from.content.size()) return absl::OkStatus();
  const uint64_t count = std::min<uint64_t>(length, from.content.size() - in_offset);
  if (absl::Status status = to.data->CopyFrom(*from.data, in_offset, from.content.size(),
                                              out_offset, count, to.content.size());
      !status.ok()) {
    return status;
  }
  const std::string bytes = from.content.substr(in_offset, count);
  if (to.content.size() < out_offset + count) to.content.resize(out_offset + count);
  to.content.replace(out_offset, count, bytes);
  return absl::OkStatus();
}

std::string Describe(char c) { return absl::StrFormat("0x%02x", static_cast<unsigned char>(c)); }

// Reads [offset, offset + length), clamped to the size, in one call and
// compares it with the model.
testing::AssertionResult ReadsBack(TestFile& file, uint64_t offset, uint64_t length) {
  const uint64_t size = file.content.size();
  if (offset >= size) return testing::AssertionSuccess();
  length = std::min(length, size - offset);
  std::string out(length, '?');
  if (absl::Status status = file.data->Read(offset, length, out.data(), size); !status.ok()) {
    return testing::AssertionFailure() << "read [" << offset << ", +" << length << "): " << status;
  }
  for (uint64_t i = 0; i < length; ++i) {
    if (out[i] != file.content[offset + i]) {
      const uint64_t at = offset + i;
      return testing::AssertionFailure()
             << "ino " << file.data->ino() << ", read [" << offset << ", +" << length
             << ") of a file of " << size << " bytes: byte " << at << " (page " << at / kPage
             << " + " << at % kPage << ") is " << Describe(out[i]) << ", expected "
             << Describe(file.content[at]);
    }
  }
  return testing::AssertionSuccess();
}

// The whole file, in small unaligned reads (through the cache) and in one
// read of all of it (large, from the arena with dirty pages laid over, once
// the file has kSmallRequest bytes).
testing::AssertionResult Intact(TestFile& file) {
  constexpr uint64_t kPiece = 3 * kPage + 123;
  for (uint64_t offset = 0; offset < file.content.size(); offset += kPiece) {
    if (testing::AssertionResult ok = ReadsBack(file, offset, kPiece); !ok) return ok;
  }
  return ReadsBack(file, 0, file.content.size());
}

bool Lists(const std::vector<uint64_t>& inodes, uint64_t ino) {
  return std::find(inodes.begin(), inodes.end(), ino) != inodes.end();
}

class PageCacheTest : public testing::Test {
 protected:
  // An arena of `arena_bytes` and a cache of `cache_pages` over one device:
  // host memory, behind a FaultyDevice (no faults until a test asks), behind
  // a RecordingDevice that takes `max_batch_copies` per call.
  void Make(uint64_t arena_bytes, uint64_t cache_pages,
            size_t max_batch_copies = std::numeric_limits<size_t>::max()) {
    // Users before what they use, when a test makes a second set.
    files_.clear();
    cache_.reset();
    arena_.reset();
    device_.reset();
    faulty_.reset();
    host_.reset();
    absl::StatusOr<std::unique_ptr<HostDevice>> host = HostDevice::Create(arena_bytes);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    faulty_ = std::make_unique<FaultyDevice>(host_.get());
    device_ = std::make_unique<RecordingDevice>(faulty_.get());
    device_->LimitBatchCopies(max_batch_copies);
    arena_ = std::make_unique<Arena>(device_.get(), kMinBlock);
    cache_ = std::make_unique<PageCache>(device_.get(), cache_pages * kPage);
    space_ = std::make_unique<CachedFile::Space>(cache_.get(), arena_.get(), kMaxExtent);
  }

  TestFile& NewFile() {
    TestFile& file = files_.emplace_back();
    file.data = std::make_unique<CachedFile>(space_.get(), 100 + files_.size() - 1);
    return file;
  }

  void TearDown() override {
    files_.clear();
    if (cache_) {
      const PageCacheStats stats = cache_->Stats();
      EXPECT_EQ(stats.cached_bytes, 0u) << "pages outlived their files";
      EXPECT_EQ(stats.dirty_bytes, 0u);
      EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
    }
    if (arena_) {
      for (const Block& block : held_) arena_->Free(block);
      held_.clear();
      EXPECT_EQ(arena_->Stats().blocks.used, 0u) << "blocks leaked";
    }
  }

  // Allocates every free min_block of the arena and keeps it.
  void FillArena() {
    for (;;) {
      absl::StatusOr<Block> block = arena_->Allocate(kMinBlock);
      if (!block.ok()) {
        ASSERT_TRUE(absl::IsResourceExhausted(block.status())) << block.status();
        break;
      }
      held_.push_back(*block);
    }
  }

  void DirtyArena() { cudafs::DirtyArena(*arena_, kDirt, &held_); }

  // A cache of 4 pages, full of clean pages 3, 1, 0 and 2 (least recently
  // used first) of a new file of `size` bytes, read at random (no read
  // starts where the last ended, so none reads ahead).
  TestFile& FullCacheOfCleanPages(uint64_t size) {
    Make(16 * MiB, 4);
    TestFile& file = NewFile();
    EXPECT_TRUE(Write(file, 0, Letters(rng_, size)).ok());  // arena only
    for (uint64_t page : {3, 1, 0, 2}) EXPECT_TRUE(ReadsBack(file, page * kPage, kPage));
    EXPECT_EQ(cache_->Stats().cached_bytes, 4 * kPage);
    return file;
  }

  std::mt19937_64 rng_{1};
  std::unique_ptr<HostDevice> host_;
  std::unique_ptr<FaultyDevice> faulty_;
  std::unique_ptr<RecordingDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PageCache> cache_;
  std::unique_ptr<CachedFile::Space> space_;
  std::vector<Block> held_;
  std::deque<TestFile> files_;  // a deque: references stay valid
};

// A fixed walk through what the filesystem does to a file, each step
// checked: small and large writes, partial pages, gaps, truncation, holes.
void Exercise(TestFile& file, std::mt19937_64& rng) {
  ASSERT_TRUE(Write(file, 100, Letters(rng, 5000)).ok());
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Write(file, 3 * kPage + 7, Letters(rng, 10)).ok());  // past the end
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Write(file, 50, Letters(rng, 2 * kPage)).ok());  // inside, unaligned
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Write(file, 20 * kPage + 1, Letters(rng, PageCache::kSmallRequest + 3)).ok());
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Write(file, 21 * kPage - 5, Letters(rng, 10)).ok());  // inside the large one
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Truncate(file, kPage + 300).ok());
  ASSERT_TRUE(Truncate(file, 6 * kPage).ok());  // grows: zeros
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(PunchHole(file, 200, 2 * kPage).ok());
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_TRUE(Intact(file));
}

TEST_F(PageCacheTest, DisabledCacheGoesStraightToTheArena) {
  Make(16 * MiB, 0);
  EXPECT_FALSE(cache_->enabled());
  TestFile& file = NewFile();
  const uint64_t writes = device_->write_batches();
  ASSERT_TRUE(Write(file, 10, Letters(rng_, 100)).ok());
  // Nothing to hold it: a small write is in the arena at once.
  EXPECT_EQ(device_->write_batches(), writes + 1);
  Exercise(file, rng_);
  const PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.budget_bytes, 0u);
  EXPECT_EQ(stats.cached_bytes, 0u);
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_EQ(stats.hits + stats.misses + stats.write_throughs + stats.flush_batches, 0u);
  EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
  EXPECT_FALSE(cache_->WaitForPressure(absl::ZeroDuration()));
}

TEST_F(PageCacheTest, BudgetIsWholePages) {
  Make(16 * MiB, 0);
  PageCache less_than_a_page(device_.get(), kPage - 1);
  EXPECT_FALSE(less_than_a_page.enabled());
  EXPECT_EQ(less_than_a_page.Stats().budget_bytes, 0u);
  PageCache some(device_.get(), 5 * kPage + 100);
  EXPECT_TRUE(some.enabled());
  EXPECT_EQ(some.Stats().budget_bytes, 5 * kPage);
  EXPECT_EQ(some.Stats().cached_bytes, 0u);
}

TEST_F(PageCacheTest, EnabledCachePassesTheSameWalk) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  Exercise(file, rng_);
}

TEST_F(PageCacheTest, SmallWriteStaysInTheCacheUntilFlush) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  const uint64_t writes = device_->write_batches();
  const uint64_t bytes = device_->written_bytes();
  ASSERT_TRUE(Write(file, 10, Letters(rng_, 100)).ok());
  EXPECT_EQ(device_->write_batches(), writes) << "a small write reached the device unflushed";
  PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, kPage);
  EXPECT_EQ(stats.cached_bytes, kPage);
  EXPECT_EQ(stats.flush_batches, 0u);
  EXPECT_TRUE(ReadsBack(file, 0, 110));
  EXPECT_TRUE(ReadsBack(file, 50, 3));

  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(device_->write_batches(), writes + 1);
  EXPECT_EQ(device_->written_bytes(), bytes + kPage) << "a flush writes whole pages";
  stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_EQ(stats.cached_bytes, kPage) << "a flushed page stays cached, clean";
  EXPECT_EQ(stats.flush_batches, 1u);
  EXPECT_EQ(stats.flushed_bytes, kPage);
  EXPECT_EQ(stats.flush_copies, 1u);
  EXPECT_TRUE(ReadsBack(file, 0, 110));

  // Nothing left to flush: no device call.
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(device_->write_batches(), writes + 1);
  EXPECT_EQ(cache_->Stats().flush_batches, 1u);
}

TEST_F(PageCacheTest, FlushCoalescesContiguousPagesIntoOneCopy) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  for (uint64_t page : {0, 1, 2}) {
    ASSERT_TRUE(Write(file, page * kPage, Letters(rng_, kPage)).ok());
  }
  ASSERT_TRUE(Write(file, 10 * kPage + 5, Letters(rng_, 100)).ok());  // past the end
  EXPECT_EQ(cache_->Stats().dirty_bytes, 4 * kPage);
  const uint64_t writes = device_->write_batches();

  ASSERT_TRUE(file.data->Flush().ok());
  const PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(device_->write_batches(), writes + 1) << "one flush, one device batch";
  EXPECT_EQ(stats.flush_batches, 1u);
  EXPECT_EQ(stats.flushed_bytes, 4 * kPage);
  EXPECT_EQ(stats.flush_copies, 2u) << "pages 0-2 are one run, page 10 another";
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_TRUE(Intact(file));

  // Only what is dirty again goes in the next batch.
  ASSERT_TRUE(Write(file, 1 * kPage + 1, Letters(rng_, 1)).ok());
  ASSERT_TRUE(Write(file, 2 * kPage + 1, Letters(rng_, 1)).ok());
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(cache_->Stats().flush_batches, 2u);
  EXPECT_EQ(cache_->Stats().flushed_bytes, 6 * kPage);
  EXPECT_EQ(cache_->Stats().flush_copies, 3u);
  EXPECT_TRUE(Intact(file));
}

// A device that takes 3 copies per call gets 10 scattered pages in 4 calls.
TEST_F(PageCacheTest, FlushBatchesHoldNoMoreThanTheDeviceTakes) {
  Make(16 * MiB, 64, 3);
  TestFile& file = NewFile();
  for (uint64_t page = 0; page < 20; page += 2) {
    ASSERT_TRUE(Write(file, page * kPage, Letters(rng_, kPage)).ok());
  }
  const uint64_t writes = device_->write_batches();

  ASSERT_TRUE(file.data->Flush().ok());
  const PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(device_->write_batches(), writes + 4);
  EXPECT_EQ(device_->largest_write_batch(), 3u);
  EXPECT_EQ(stats.flush_batches, 4u);
  EXPECT_EQ(stats.flushed_bytes, 10 * kPage);
  EXPECT_EQ(stats.flush_copies, 10u);
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_TRUE(Intact(file));
}

TEST_F(PageCacheTest, FlushPutsTheBytesInTheArena) {
  Make(16 * MiB, 64);
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 256 * KiB)).ok());
  EXPECT_EQ(cache_->Stats().cached_bytes, 0u) << "a large write was cached";
  const uint64_t writes = device_->write_batches();
  ASSERT_TRUE(Write(file, 3 * kPage + 100, Letters(rng_, 5000)).ok());
  ASSERT_TRUE(Write(file, 40 * kPage, Letters(rng_, kPage)).ok());
  ASSERT_TRUE(Write(file, 63 * kPage + 4000, Letters(rng_, 96)).ok());
  EXPECT_EQ(device_->write_batches(), writes);
  // A large read gets the arena's (older) bytes with the dirty pages over them.
  EXPECT_TRUE(ReadsBack(file, 0, file.content.size()));

  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(device_->write_batches(), writes + 1);
  ASSERT_EQ(cache_->Stats().dirty_bytes, 0u);
  // With no page dirty a large read is the arena's bytes alone (it never
  // looks at clean pages, nor counts hits): the flush put them there.
  const PageCacheStats before = cache_->Stats();
  EXPECT_TRUE(ReadsBack(file, 0, file.content.size()));
  EXPECT_EQ(cache_->Stats().hits, before.hits);
  EXPECT_EQ(cache_->Stats().misses, before.misses);
}

TEST_F(PageCacheTest, PartialWritesKeepTheBytesAroundThem) {
  Make(16 * MiB, 64);
  TestFile& file = NewFile();
  // In the arena only: nothing of it is cached.
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 160 * KiB)).ok());
  PageCacheStats before = cache_->Stats();
  // One uncached page: read from the arena before the write.
  ASSERT_TRUE(Write(file, 5 * kPage + 100, Letters(rng_, 50)).ok());
  EXPECT_EQ(cache_->Stats().misses, before.misses + 1);
  EXPECT_TRUE(ReadsBack(file, 5 * kPage, kPage));
  // Partial, whole, partial: only the partial ones are fetched.
  before = cache_->Stats();
  ASSERT_TRUE(Write(file, 7 * kPage + 4000, Letters(rng_, 2 * kPage - 4000 + 10)).ok());
  EXPECT_EQ(cache_->Stats().misses, before.misses + 2);
  EXPECT_TRUE(ReadsBack(file, 6 * kPage, 5 * kPage));
  // A dirty page again: a hit, nothing fetched.
  before = cache_->Stats();
  ASSERT_TRUE(Write(file, 5 * kPage + 3000, Letters(rng_, 7)).ok());
  EXPECT_EQ(cache_->Stats().misses, before.misses);
  EXPECT_EQ(cache_->Stats().hits, before.hits + 1);
  EXPECT_TRUE(Intact(file));
  // A clean page: also a hit.
  ASSERT_TRUE(file.data->Flush().ok());
  before = cache_->Stats();
  ASSERT_TRUE(Write(file, 5 * kPage + 1, Letters(rng_, 2)).ok());
  EXPECT_EQ(cache_->Stats().misses, before.misses);
  EXPECT_EQ(cache_->Stats().hits, before.hits + 1);
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_TRUE(Intact(file));
}

TEST_F(PageCacheTest, WritesPastTheEndLeaveZerosInTheGap) {
  Make(16 * MiB, 16);
  DirtyArena();  // a new block that is not zeroed shows kDirt
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 100)).ok());
  // The tail of page 0, pages 1 and 2, the head of page 3.
  ASSERT_TRUE(Write(file, 3 * kPage + 50, Letters(rng_, 50)).ok());
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_TRUE(Intact(file));
  // Large, far past the end, then small past that.
  ASSERT_TRUE(Write(file, 300 * KiB + 3, Letters(rng_, PageCache::kSmallRequest)).ok());
  ASSERT_TRUE(Write(file, 600 * KiB + 3, Letters(rng_, 10)).ok());
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_TRUE(Intact(file));
}

TEST_F(PageCacheTest, TruncateDownThenUpReadsZeros) {
  for (const bool clean : {false, true}) {
    SCOPED_TRACE(clean ? "clean pages" : "dirty pages");
    Make(16 * MiB, 16);
    DirtyArena();
    TestFile& file = NewFile();
    ASSERT_TRUE(Write(file, 0, Letters(rng_, 6 * kPage)).ok());
    if (clean) {
      ASSERT_TRUE(file.data->Flush().ok());
    }
    // Drops pages 3-5, cuts page 2.
    ASSERT_TRUE(Truncate(file, 2 * kPage + 123).ok());
    ASSERT_TRUE(Truncate(file, 6 * kPage).ok());
    EXPECT_TRUE(Intact(file));
    ASSERT_TRUE(Write(file, 8 * kPage + 1, Letters(rng_, 5)).ok());
    EXPECT_TRUE(Intact(file));
    // Large enough for a large read, from the arena.
    ASSERT_TRUE(Write(file, 190 * KiB, Letters(rng_, 10 * KiB)).ok());
    ASSERT_TRUE(file.data->Flush().ok());
    EXPECT_TRUE(Intact(file));
    // Down to nothing, inside a page, then up again.
    ASSERT_TRUE(Write(file, 10, Letters(rng_, 10)).ok());
    ASSERT_TRUE(Truncate(file, 15).ok());
    ASSERT_TRUE(Truncate(file, 3 * kPage).ok());
    EXPECT_TRUE(Intact(file));
    ASSERT_TRUE(Truncate(file, 0).ok());
    ASSERT_TRUE(Truncate(file, 3 * kPage).ok());
    EXPECT_TRUE(Intact(file));
    EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
    TearDown();
    files_.clear();
  }
}

TEST_F(PageCacheTest, PunchHoleZerosTheRange) {
  for (const bool clean : {false, true}) {
    SCOPED_TRACE(clean ? "clean pages" : "dirty pages");
    Make(16 * MiB, 16);
    TestFile& file = NewFile();
    ASSERT_TRUE(Write(file, 0, Letters(rng_, 160 * KiB)).ok());
    ASSERT_TRUE(Write(file, 0, Letters(rng_, 8 * kPage)).ok());  // cached, dirty
    if (clean) {
      ASSERT_TRUE(file.data->Flush().ok());
    }
    // Page 1 in part, 2-4 whole, page 5 in part.
    ASSERT_TRUE(PunchHole(file, kPage + 1000, 4 * kPage).ok());
    EXPECT_TRUE(Intact(file));
    // Inside one page; then where nothing is cached.
    ASSERT_TRUE(PunchHole(file, 7 * kPage + 10, 20).ok());
    ASSERT_TRUE(PunchHole(file, 30 * kPage + 7, 3 * kPage).ok());
    EXPECT_TRUE(Intact(file));
    // Pages 0, 1, 5, 6 and 7: the partly punched ones stay, 2-4 go.
    EXPECT_EQ(cache_->Stats().dirty_bytes, clean ? 0 : 5 * kPage);
    ASSERT_TRUE(file.data->Flush().ok());
    EXPECT_TRUE(Intact(file));
    // Written again, the hole takes the new bytes.
    ASSERT_TRUE(Write(file, 2 * kPage + 5, Letters(rng_, 10)).ok());
    EXPECT_TRUE(Intact(file));
    TearDown();
    files_.clear();
  }
}

TEST_F(PageCacheTest, CopyFromSeesDirtyPagesOfBothFiles) {
  Make(16 * MiB, 32);
  TestFile& from = NewFile();
  TestFile& to = NewFile();
  // Both dirty.
  ASSERT_TRUE(Write(from, 0, Letters(rng_, 10 * kPage)).ok());
  ASSERT_TRUE(Write(to, 0, Letters(rng_, 12 * kPage)).ok());
  ASSERT_TRUE(ReadsBack(to, 0, 100));
  // Unaligned: the target's pages in the range are cut in part.
  ASSERT_TRUE(Copy(from, 100, to, 2 * kPage + 50, 5 * kPage).ok());
  EXPECT_TRUE(Intact(to));
  EXPECT_TRUE(Intact(from));
  // Within one file, ranges apart; then past the end.
  ASSERT_TRUE(Write(to, 9 * kPage, Letters(rng_, 10)).ok());
  ASSERT_TRUE(Copy(to, 9 * kPage, to, kPage + 3, kPage).ok());
  ASSERT_TRUE(Copy(from, 0, to, 20 * kPage + 1, 10 * kPage).ok());
  EXPECT_TRUE(Intact(to));
  ASSERT_TRUE(Write(to, 3 * kPage, Letters(rng_, 10)).ok());
  ASSERT_TRUE(to.data->Flush().ok());
  EXPECT_TRUE(Intact(to));
  EXPECT_TRUE(Intact(from));
}

// A small copy is a read and a write through the cache: from a source
// whose pages are cached, nothing reaches the device until a flush. A large
// one runs on the device, after the source's dirty pages are written.
TEST_F(PageCacheTest, SmallCopiesStayInTheCacheLargeOnesRunOnTheDevice) {
  Make(16 * MiB, 128);
  TestFile& from = NewFile();
  TestFile& to = NewFile();
  ASSERT_TRUE(Write(from, 0, Letters(rng_, 3 * kPage + 10)).ok());
  ASSERT_TRUE(Write(from, 20 * kPage, Letters(rng_, kPage)).ok());  // a hole before it
  const uint64_t writes = device_->write_batches();
  const uint64_t reads = device_->read_batches();
  ASSERT_TRUE(Copy(from, 5, to, 0, 3 * kPage).ok());
  ASSERT_TRUE(Copy(from, 2 * kPage, to, 7 * kPage + 1, 19 * kPage).ok());  // the hole too
  EXPECT_EQ(device_->write_batches(), writes);
  EXPECT_EQ(device_->read_batches(), reads);
  EXPECT_TRUE(Intact(to));
  ASSERT_TRUE(to.data->Flush().ok());
  EXPECT_GT(device_->write_batches(), writes);
  EXPECT_TRUE(Intact(to));

  TestFile& large = NewFile();
  ASSERT_TRUE(Write(large, 0, Letters(rng_, PageCache::kSmallRequest + kPage)).ok());
  ASSERT_TRUE(Write(large, 3, Letters(rng_, 10)).ok());  // dirty
  const uint64_t before_large = device_->write_batches();
  ASSERT_TRUE(Copy(large, 0, to, 2 * kPage, PageCache::kSmallRequest).ok());
  EXPECT_GT(device_->write_batches(), before_large) << "the source's dirty page was not flushed";
  EXPECT_TRUE(Intact(to));
  EXPECT_TRUE(Intact(large));
}

TEST_F(PageCacheTest, SequentialSmallReadsReadAhead) {
  constexpr uint64_t kAhead = PageCache::kReadAhead / kPage;
  Make(16 * MiB, 64);
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 2 * kAhead * kPage + 100)).ok());  // arena only
  uint64_t reads = device_->read_batches();
  ASSERT_TRUE(ReadsBack(file, 0, kPage));  // not sequential: this page only
  EXPECT_EQ(device_->read_batches(), ++reads);
  ASSERT_TRUE(ReadsBack(file, kPage, kPage));  // sequential: fills ahead
  EXPECT_EQ(device_->read_batches(), ++reads);
  const PageCacheStats before = cache_->Stats();
  for (uint64_t page = 2; page < 2 + kAhead; ++page) {
    ASSERT_TRUE(ReadsBack(file, page * kPage, kPage));
  }
  EXPECT_EQ(device_->read_batches(), reads) << "the read-ahead pages were fetched again";
  EXPECT_EQ(cache_->Stats().hits, before.hits + kAhead);
  EXPECT_EQ(cache_->Stats().misses, before.misses);
  // Read-ahead stops at the end of the file.
  for (uint64_t offset = (2 + kAhead) * kPage; offset < file.content.size(); offset += kPage) {
    ASSERT_TRUE(ReadsBack(file, offset, kPage));
  }
  EXPECT_LE(cache_->Stats().cached_bytes, (file.content.size() + kPage - 1) / kPage * kPage);
  EXPECT_TRUE(Intact(file));
}

// Eviction takes the least recently used clean page: a page read again
// stays, one not read since goes.
TEST_F(PageCacheTest, EvictionTakesTheLeastRecentlyUsedPage) {
  TestFile& file = FullCacheOfCleanPages(160 * KiB);
  ASSERT_TRUE(ReadsBack(file, 3 * kPage, 100));  // page 3: most recent now
  uint64_t reads = device_->read_batches();
  // A write always takes a frame (a random read into a full cache seldom
  // does: RandomReadsIntoAFullCacheAreCachedOneInEight).
  ASSERT_TRUE(Write(file, 5 * kPage, Letters(rng_, kPage)).ok());  // evicts page 1
  EXPECT_EQ(device_->read_batches(), reads);
  ASSERT_TRUE(ReadsBack(file, 3 * kPage + 1, 10));
  EXPECT_EQ(device_->read_batches(), reads) << "the page read last was evicted";
  ASSERT_TRUE(ReadsBack(file, 1 * kPage + 1, 10));
  EXPECT_EQ(device_->read_batches(), ++reads) << "the least recently used page stayed";
  EXPECT_EQ(cache_->Stats().cached_bytes, 4 * kPage);
}

// A random read that misses a full cache is cached one time in
// kAdmitOneIn: a working set larger than the cache would otherwise evict a
// page on every read for nothing.
TEST_F(PageCacheTest, RandomReadsIntoAFullCacheAreCachedOneInEight) {
  // While frames are free every miss is cached.
  TestFile& file = FullCacheOfCleanPages(1 * MiB);
  uint64_t reads = device_->read_batches();
  for (uint64_t page : {3, 1, 0, 2}) ASSERT_TRUE(ReadsBack(file, page * kPage + 1, 10));
  ASSERT_EQ(device_->read_batches(), reads) << "pages read while frames were free not cached";
  // Full: of kAdmitOneIn random misses (none starts where the last ended),
  // exactly one is cached, evicting the least recently used page (3).
  std::vector<uint64_t> misses;
  for (uint64_t i = 0; i < PageCache::kAdmitOneIn; ++i) misses.push_back(10 + 2 * i);
  for (uint64_t page : misses) ASSERT_TRUE(ReadsBack(file, page * kPage, kPage));
  EXPECT_EQ(device_->read_batches(), reads += misses.size());
  int cached = 0;
  for (uint64_t page : misses) {
    ASSERT_TRUE(ReadsBack(file, page * kPage + 1, 10));
    if (device_->read_batches() == reads) ++cached;
    reads = device_->read_batches();
  }
  EXPECT_EQ(cached, 1);
  EXPECT_EQ(cache_->Stats().cached_bytes, 4 * kPage);
}

// A cache large enough for several shards: one file's pages spread over
// all of them, so it alone can fill the whole budget with dirty pages, and
// a flush still copies runs of contiguous pages as single pieces.
TEST_F(PageCacheTest, OneFileFillsEveryShard) {
  constexpr uint64_t kPages = PageCache::kMaxShards * PageCache::kMinShardFrames;
  Make(64 * MiB, kPages);
  TestFile& file = NewFile();
  // Written in small requests, sequentially: every page is cached, dirty.
  const uint64_t kWrite = 16 * kPage;
  for (uint64_t offset = 0; offset < kPages * kPage; offset += kWrite) {
    ASSERT_TRUE(Write(file, offset, Letters(rng_, kWrite)).ok());
  }
  PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, kPages * kPage);
  EXPECT_EQ(stats.write_throughs, 0u);
  ASSERT_TRUE(file.data->Flush().ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_EQ(stats.flushed_bytes, kPages * kPage);
  // A chunk's pages sit in contiguous frames of its shard.
  EXPECT_LE(stats.flush_copies, kPages / PageCache::kChunkPages);
  EXPECT_TRUE(Intact(file));
  // Every page is a hit now.
  const uint64_t reads = device_->read_batches();
  for (uint64_t page = 0; page < kPages; page += 7) ASSERT_TRUE(ReadsBack(file, page * kPage, 100));
  EXPECT_EQ(device_->read_batches(), reads);
}

// The budget is tiny and other files' dirty pages fill it: a write that
// cannot get a frame makes its own file's pages clean, or goes around.
TEST_F(PageCacheTest, WritesGoAroundACacheFullOfDirtyPages) {
  Make(16 * MiB, 4);
  TestFile& a = NewFile();
  TestFile& b = NewFile();
  for (uint64_t page = 0; page < 4; ++page) {
    ASSERT_TRUE(Write(a, page * kPage, Letters(rng_, kPage)).ok());
  }
  PageCacheStats stats = cache_->Stats();
  ASSERT_EQ(stats.dirty_bytes, 4 * kPage);
  // b has nothing of its own to flush and may not flush a's.
  const uint64_t writes = device_->write_batches();
  ASSERT_TRUE(Write(b, 100, Letters(rng_, 200)).ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.write_throughs, 1u);
  EXPECT_EQ(device_->write_batches(), writes + 1) << "the write did not reach the arena";
  EXPECT_EQ(stats.dirty_bytes, 4 * kPage);
  EXPECT_EQ(stats.flush_batches, 0u);
  EXPECT_TRUE(Intact(b));  // no frame for its page either: read around
  // a's fifth page: around the cache too, rather than wait for a flush of
  // a's own pages (the flusher's job).
  ASSERT_TRUE(Write(a, 4 * kPage + 10, Letters(rng_, 10)).ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.flush_batches, 0u);
  EXPECT_EQ(stats.write_throughs, 2u);
  EXPECT_EQ(stats.dirty_bytes, 4 * kPage);
  EXPECT_TRUE(Intact(a));
  // Once a's pages are clean they can be taken again.
  ASSERT_TRUE(a.data->Flush().ok());
  ASSERT_TRUE(Write(a, 4 * kPage + 30, Letters(rng_, 10)).ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.write_throughs, 2u);
  EXPECT_EQ(stats.dirty_bytes, kPage);
  EXPECT_EQ(stats.cached_bytes, 4 * kPage);
  // More pages than the whole cache: around it.
  ASSERT_TRUE(Write(b, 0, Letters(rng_, 6 * kPage)).ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.write_throughs, 8u);
  EXPECT_LE(stats.cached_bytes, stats.budget_bytes);
  EXPECT_TRUE(Intact(a));
  EXPECT_TRUE(Intact(b));
  ASSERT_TRUE(a.data->Flush().ok());
  ASSERT_TRUE(b.data->Flush().ok());
  EXPECT_TRUE(Intact(a));
  EXPECT_TRUE(Intact(b));
}

TEST_F(PageCacheTest, ManyPagesOfManyFilesThroughAFewFrames) {
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const auto random = [&](uint64_t bound) {
    return std::uniform_int_distribution<uint64_t>(0, bound)(rng);
  };
  Make(16 * MiB, 4);
  std::vector<TestFile*> files;
  for (int i = 0; i < 3; ++i) files.push_back(&NewFile());
  for (int op = 0; op < 1500; ++op) {
    TestFile& file = *files[random(files.size() - 1)];
    const uint64_t offset = random(64) * kPage + (random(1) ? random(kPage - 1) : 0);
    const uint64_t length = random(1) ? 1 + random(3 * kPage) : kPage * (1 + random(2));
    SCOPED_TRACE(absl::StrFormat("operation %d: ino %d offset %d length %d", op, file.data->ino(),
                                 offset, length));
    switch (random(5)) {
      case 0:
        ASSERT_TRUE(ReadsBack(file, offset, length));
        break;
      case 1:
        if (random(3) == 0) {
          ASSERT_TRUE(file.data->Flush().ok());
        }
        break;
      default:
        ASSERT_TRUE(Write(file, offset, Letters(rng, length)).ok());
    }
    const PageCacheStats stats = cache_->Stats();
    ASSERT_LE(stats.cached_bytes, stats.budget_bytes);
    ASSERT_LE(stats.dirty_bytes, stats.cached_bytes);
  }
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
  const PageCacheStats stats = cache_->Stats();
  EXPECT_GT(stats.write_throughs, 0u) << "no write ever went around the cache";
  EXPECT_GT(stats.flush_batches, 0u) << "no write ever flushed its file for a frame";
  for (TestFile* file : files) ASSERT_TRUE(file->data->Flush().ok());
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
}

TEST_F(PageCacheTest, DirtyFilesListsExactlyTheFilesWithDirtyPages) {
  Make(16 * MiB, 16);
  TestFile& a = NewFile();
  TestFile& b = NewFile();
  TestFile& c = NewFile();
  TestFile& d = NewFile();
  ASSERT_TRUE(Write(a, 0, Letters(rng_, 10)).ok());
  // b: large, so in the arena; then a clean page of it.
  ASSERT_TRUE(Write(b, 0, Letters(rng_, PageCache::kSmallRequest)).ok());
  ASSERT_TRUE(ReadsBack(b, 0, 10));
  ASSERT_TRUE(Write(c, kPage + 5, Letters(rng_, 3 * kPage)).ok());
  std::vector<uint64_t> dirty = cache_->DirtyFiles(absl::ZeroDuration());
  std::sort(dirty.begin(), dirty.end());
  EXPECT_EQ(dirty, (std::vector<uint64_t>{a.data->ino(), c.data->ino()}));
  // None has been dirty for an hour.
  EXPECT_TRUE(cache_->DirtyFiles(absl::Hours(1)).empty());

  ASSERT_TRUE(a.data->Flush().ok());
  EXPECT_EQ(cache_->DirtyFiles(absl::ZeroDuration()), std::vector<uint64_t>{c.data->ino()});
  // Dropping the dirty pages (a truncate) makes the file clean.
  ASSERT_TRUE(Truncate(c, kPage).ok());
  EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  // So does deleting the file.
  ASSERT_TRUE(Write(d, 0, Letters(rng_, 10)).ok());
  EXPECT_EQ(cache_->DirtyFiles(absl::ZeroDuration()), std::vector<uint64_t>{d.data->ino()});
  d.data.reset();
  EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  EXPECT_EQ(cache_->Stats().cached_bytes, kPage + kPage) << "a's and b's clean pages";
}

TEST_F(PageCacheTest, PressureMeansMoreThanHalfDirty) {
  Make(16 * MiB, 8);
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 4 * kPage)).ok());
  EXPECT_FALSE(cache_->WaitForPressure(absl::Milliseconds(1)));
  ASSERT_TRUE(Write(file, 4 * kPage, Letters(rng_, 1)).ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(cache_->WaitForPressure(absl::Seconds(60)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "waited although under pressure";
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_FALSE(cache_->WaitForPressure(absl::ZeroDuration()));

  // Wake ends a wait early (the flusher stopping).
  std::atomic<bool> done{false};
  bool pressure = true;
  std::thread waiter([&] {
    pressure = cache_->WaitForPressure(absl::Seconds(60));
    done = true;
  });
  const absl::Time wake_start = absl::Now();
  while (!done) {
    cache_->Wake();
    absl::SleepFor(absl::Milliseconds(5));
  }
  waiter.join();
  EXPECT_FALSE(pressure);
  EXPECT_LT(absl::Now() - wake_start, absl::Seconds(30));
}

// A write that the arena cannot back fails when it is made, changes
// nothing, and leaves the dirty pages flushable: a flush never needs space.
TEST_F(PageCacheTest, CachedWriteWithoutSpaceFailsAtWriteTime) {
  Make(2 * MiB, 16);  // one granule
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 100)).ok());  // one 4 KiB block
  ASSERT_TRUE(file.data->Flush().ok());
  ASSERT_TRUE(Write(file, 100, Letters(rng_, 50)).ok());  // dirty again
  FillArena();
  const uint64_t allocated = file.data->allocated_bytes();
  EXPECT_EQ(allocated, kMinBlock);
  const std::string content = file.content;
  const PageCacheStats before = cache_->Stats();
  ASSERT_EQ(before.dirty_bytes, kPage);

  // Page 0 is mapped, page 1 is not: all or nothing.
  absl::Status status = Write(file, 2000, Letters(rng_, 4000));
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  status = Write(file, 5 * kPage + 1, Letters(rng_, 10));  // wholly past the end
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  PageCacheStats after = cache_->Stats();
  EXPECT_EQ(after.cached_bytes, before.cached_bytes) << "a failed write kept a frame";
  EXPECT_EQ(after.dirty_bytes, before.dirty_bytes);
  EXPECT_EQ(file.data->allocated_bytes(), allocated);
  EXPECT_EQ(file.content, content);
  EXPECT_TRUE(Intact(file));
  // Large: around the cache, and fails the same way.
  status = Write(file, 0, Letters(rng_, PageCache::kSmallRequest));
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_EQ(file.data->allocated_bytes(), allocated);
  EXPECT_TRUE(Intact(file));

  // Mapped space needs nothing new: writes there succeed, and so does the
  // flush, with the arena still full.
  ASSERT_TRUE(Write(file, 1000, Letters(rng_, 3000)).ok());
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  EXPECT_TRUE(Intact(file));
  // With a block free again, the failed write goes through.
  arena_->Free(held_.back());
  held_.pop_back();
  ASSERT_TRUE(Write(file, 2000, Letters(rng_, 4000)).ok());
  ASSERT_TRUE(file.data->Flush().ok());
  EXPECT_TRUE(Intact(file));
}

// Random operations on four files over one small cache (and, for contrast,
// over none and over a roomy one), every read checked against the model.
class RandomOperations {
 public:
  RandomOperations(uint64_t seed, PageCache* cache, uint64_t max_size)
      : rng_(seed), cache_(cache), max_size_(max_size) {}

  uint64_t Uniform(uint64_t low, uint64_t high) {
    return std::uniform_int_distribution<uint64_t>(low, high)(rng_);
  }
  std::mt19937_64& rng() { return rng_; }

  // One operation on `file`, or a copy into it from `source` when given
  // (which may be `file`). Describes it in `what`.
  testing::AssertionResult Step(TestFile& file, TestFile* source, std::string* what) {
    const uint64_t size = file.content.size();
    const uint64_t kind = Uniform(0, 99);
    if (kind < 30) return DoWrite(file, Offset(size), SmallLength(), what);
    if (kind < 33) return DoWrite(file, Offset(size), LargeLength(), what);
    if (kind < 42) {  // whole pages
      return DoWrite(file, Uniform(0, size / kPage + 2) * kPage, kPage * Uniform(1, 4), what);
    }
    if (kind < 65 || (kind < 72 && size < PageCache::kSmallRequest)) {
      if (size == 0) return testing::AssertionSuccess();
      const uint64_t offset =
          Uniform(0, 3) == 0 ? Uniform(0, (size - 1) / kPage) * kPage : Uniform(0, size - 1);
      const uint64_t length = SmallLength();
      *what = absl::StrFormat("small read [%d, +%d)", offset, length);
      return ReadsBack(file, offset, length);
    }
    if (kind < 72) {
      const uint64_t offset = Uniform(0, size - PageCache::kSmallRequest);
      const uint64_t length = Uniform(PageCache::kSmallRequest, size - offset);
      *what = absl::StrFormat("large read [%d, +%d)", offset, length);
      return ReadsBack(file, offset, length);
    }
    if (kind < 76) {
      uint64_t new_size;
      switch (Uniform(0, 3)) {
        case 0:
          new_size = Uniform(0, size);
          break;
        case 1:
          new_size = size + Uniform(1, 3 * kPage);
          break;
        case 2:
          new_size = Uniform(0, size / kPage) * kPage;
          break;
        default:
          new_size = size / 2 + Uniform(0, size / 2);
          break;
      }
      new_size = std::min(new_size, max_size_);
      *what = absl::StrFormat("truncate %d to %d", size, new_size);
      return Check(Truncate(file, new_size));
    }
    if (kind < 81) {
      if (size == 0) return testing::AssertionSuccess();
      const uint64_t offset = Uniform(0, size - 1);
      const uint64_t length = Uniform(0, 1) ? Uniform(1, 3 * kPage) : Uniform(1, 300 * KiB);
      *what = absl::StrFormat("punch [%d, +%d)", offset, length);
      return Check(PunchHole(file, offset, length));
    }
    if (kind < 86) {
      *what = "flush";
      if (absl::Status status = file.data->Flush(); !status.ok()) return Check(status);
      if (Lists(cache_->DirtyFiles(absl::ZeroDuration()), file.data->ino())) {
        return testing::AssertionFailure() << "dirty after a flush";
      }
      return testing::AssertionSuccess();
    }
    if (kind < 91) {
      if (source == nullptr) return DoWrite(file, Offset(size), SmallLength(), what);
      const uint64_t source_size = source->content.size();
      if (source_size == 0) return testing::AssertionSuccess();
      const uint64_t in = Uniform(0, source_size - 1);
      uint64_t count = Uniform(0, 1) ? Uniform(1, 5 * kPage) : Uniform(1, 300 * KiB);
      count = std::min(count, source_size - in);
      uint64_t out = Offset(size);
      if (out + count > max_size_) out = Uniform(0, max_size_ - count);
      if (source == &file && in < out + count && out < in + count) {
        return testing::AssertionSuccess();  // overlapping: not allowed
      }
      *what =
          absl::StrFormat("copy [%d, +%d) of ino %d to %d", in, count, source->data->ino(), out);
      return Check(Copy(*source, in, file, out, count));
    }
    if (kind < 95) {
      *what = "trim tail";  // the last writer closes
      file.data->TrimTail(size);
      return testing::AssertionSuccess();
    }
    // fallocate: reserves, and grows the file unless KEEP_SIZE.
    const uint64_t offset = Uniform(0, size + 16 * kPage);
    const uint64_t length =
        std::min(Uniform(1, 128 * KiB), max_size_ - std::min(max_size_, offset));
    if (length == 0) return testing::AssertionSuccess();
    const bool keep_size = Uniform(0, 1);
    *what = absl::StrFormat("reserve [%d, +%d)%s", offset, length, keep_size ? " keep size" : "");
    if (absl::Status status = file.data->Reserve(offset, length); !status.ok()) {
      return Check(status);
    }
    if (!keep_size && offset + length > size) file.content.resize(offset + length, '\0');
    return testing::AssertionSuccess();
  }

 private:
  static testing::AssertionResult Check(const absl::Status& status) {
    if (status.ok()) return testing::AssertionSuccess();
    return testing::AssertionFailure() << status;
  }

  testing::AssertionResult DoWrite(TestFile& file, uint64_t offset, uint64_t length,
                                   std::string* what) {
    length = std::min(length, max_size_);
    if (offset + length > max_size_) offset = Uniform(0, max_size_ - length);
    *what = absl::StrFormat("write [%d, +%d) to a file of %d", offset, length, file.content.size());
    return Check(Write(file, offset, Letters(rng_, length)));
  }

  // Inside the file, on a page boundary, just past its end, or anywhere.
  uint64_t Offset(uint64_t size) {
    switch (Uniform(0, 3)) {
      case 0:
        return Uniform(0, size);
      case 1:
        return Uniform(0, size / kPage + 1) * kPage;
      case 2:
        return size + Uniform(0, 3 * kPage);
      default:
        return Uniform(0, max_size_);
    }
  }

  // Under kSmallRequest: a few bytes, up to a page, whole pages, up to a few
  // pages, or up to the limit.
  uint64_t SmallLength() {
    switch (Uniform(0, 4)) {
      case 0:
        return Uniform(1, 64);
      case 1:
        return Uniform(1, kPage);
      case 2:
        return kPage * Uniform(1, 4);
      case 3:
        return Uniform(1, 4 * kPage);
      default:
        return Uniform(1, PageCache::kSmallRequest - 1);
    }
  }

  uint64_t LargeLength() {
    return Uniform(PageCache::kSmallRequest, PageCache::kSmallRequest + 256 * KiB);
  }

  std::mt19937_64 rng_;
  PageCache* const cache_;
  const uint64_t max_size_;
};

class PageCacheModelTest : public PageCacheTest, public testing::WithParamInterface<uint64_t> {};

TEST_P(PageCacheModelTest, RandomOperationsMatchAModel) {
  constexpr int kFiles = 4;
  const int kOperations = Scaled(20000);
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  Make(64 * MiB, GetParam());
  DirtyArena();  // stale bytes that anyone reads show as kDirt
  std::vector<TestFile*> files;
  for (int i = 0; i < kFiles; ++i) files.push_back(&NewFile());
  RandomOperations random(seed, cache_.get(), 1536 * KiB);
  for (int op = 0; op < kOperations; ++op) {
    TestFile& file = *files[random.Uniform(0, kFiles - 1)];
    TestFile* source = files[random.Uniform(0, kFiles - 1)];
    std::string what;
    const testing::AssertionResult ok = random.Step(file, source, &what);
    ASSERT_TRUE(ok) << "operation " << op << " on ino " << file.data->ino() << ": " << what;
    const PageCacheStats stats = cache_->Stats();
    ASSERT_LE(stats.cached_bytes, stats.budget_bytes) << "operation " << op << ": " << what;
    ASSERT_LE(stats.dirty_bytes, stats.cached_bytes) << "operation " << op << ": " << what;
    if (op % 1000 == 999) {
      for (TestFile* each : files) {
        ASSERT_TRUE(Intact(*each)) << "after operation " << op << ": " << what;
      }
    }
  }
  for (TestFile* file : files) ASSERT_TRUE(file->data->Flush().ok());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
  const PageCacheStats stats = cache_->Stats();
  std::printf("%s", stats.ToText().c_str());
  if (cache_->enabled()) {
    EXPECT_GT(stats.hits, 0u);
    EXPECT_GT(stats.flush_batches, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, PageCacheModelTest, testing::Values(0, 16, 256, 1024),
                         [](const testing::TestParamInfo<uint64_t>& info) {
                           return info.param == 0 ? std::string("Disabled")
                                                  : std::to_string(info.param) + "Pages";
                         });

// Each thread owns a file (the inode lock guarantees that in production);
// they share the cache's lock, its frames and its staging buffers, and evict
// each other's clean pages.
TEST_F(PageCacheTest, ThreadsSharingOneCacheKeepTheirOwnFiles) {
  constexpr int kThreads = 4;
  constexpr int kOperations = 3000;
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  Make(64 * MiB, 16);
  std::vector<TestFile*> files;
  for (int i = 0; i < kThreads; ++i) files.push_back(&NewFile());
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomOperations random(seed + t, cache_.get(), 512 * KiB);
      TestFile& file = *files[t];
      for (int op = 0; op < kOperations; ++op) {
        std::string what;
        const testing::AssertionResult ok = random.Step(file, nullptr, &what);
        if (!ok) {
          ADD_FAILURE() << "thread " << t << ", operation " << op << ": " << what << ": "
                        << ok.message();
          break;
        }
      }
      --running;
    });
  }
  // Meanwhile, what the flusher and --stats ask.
  uint64_t samples = 0;
  while (running > 0) {
    const PageCacheStats stats = cache_->Stats();
    EXPECT_LE(stats.cached_bytes, stats.budget_bytes);
    EXPECT_LE(stats.dirty_bytes, stats.cached_bytes);
    EXPECT_LE(cache_->DirtyFiles(absl::ZeroDuration()).size(), size_t{kThreads});
    ++samples;
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(samples, 0u);
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
  for (TestFile* file : files) ASSERT_TRUE(file->data->Flush().ok());
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
  const PageCacheStats stats = cache_->Stats();
  EXPECT_GT(stats.write_throughs + stats.flush_batches, 0u);
}

// Writers of different files at once, each doing what the model test
// does to its own file (as each holds its inode's lock), over a cache of
// several shards that is smaller than what they write: they take frames
// from each other's pages in every shard, and every file still reads back
// exactly, with the counts consistent.
TEST_F(PageCacheTest, ConcurrentFilesShareTheShards) {
  constexpr int kThreads = 4;
  const int kOperations = Scaled(3000);
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  Make(64 * MiB, 4 * PageCache::kMinShardFrames);
  std::vector<TestFile*> files;
  for (int t = 0; t < kThreads; ++t) files.push_back(&NewFile());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RandomOperations random(seed + t, cache_.get(), 1536 * KiB);
      for (int op = 0; op < kOperations; ++op) {
        std::string what;
        if (const testing::AssertionResult ok = random.Step(*files[t], files[t], &what); !ok) {
          ADD_FAILURE() << "thread " << t << ", operation " << op << ": " << what << ": "
                        << ok.message();
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  PageCacheStats stats = cache_->Stats();
  EXPECT_LE(stats.cached_bytes, stats.budget_bytes);
  EXPECT_LE(stats.dirty_bytes, stats.cached_bytes);
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
  for (TestFile* file : files) ASSERT_TRUE(file->data->Flush().ok());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
}

// Reads share the inode lock: several readers of one file fill and hit its
// pages at once while a writer of another file evicts them.
TEST_F(PageCacheTest, ConcurrentReadersOfOneFileAgree) {
  constexpr int kReaders = 3;
  constexpr int kReads = 3000;
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  Make(64 * MiB, 8);
  TestFile& shared = NewFile();
  TestFile& other = NewFile();
  ASSERT_TRUE(Write(shared, 0, Letters(rng_, 256 * KiB + 100)).ok());
  for (uint64_t page : {0, 1, 7, 30}) {  // dirty pages among clean ones
    ASSERT_TRUE(Write(shared, page * kPage + 9, Letters(rng_, 300)).ok());
  }
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    RandomOperations random(seed + 100, cache_.get(), 256 * KiB);
    for (int op = 0; !stop; ++op) {
      std::string what;
      if (const testing::AssertionResult ok = random.Step(other, nullptr, &what); !ok) {
        ADD_FAILURE() << "writer, operation " << op << ": " << what << ": " << ok.message();
        break;
      }
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      const uint64_t size = shared.content.size();
      uint64_t offset = 0;
      for (int i = 0; i < kReads; ++i) {
        // Mostly sequential runs (read-ahead), some jumps, a few large reads.
        const uint64_t length =
            rng() % 50 == 0 ? PageCache::kSmallRequest : 1 + rng() % (2 * kPage);
        if (rng() % 8 == 0 || offset >= size) offset = rng() % size;
        if (const testing::AssertionResult ok = ReadsBack(shared, offset, length); !ok) {
          ADD_FAILURE() << "reader " << t << ", read " << i << ": " << ok.message();
          break;
        }
        offset += length;
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  stop = true;
  writer.join();
  // Nobody but the file's own writer may clean or evict its dirty pages.
  EXPECT_GE(cache_->Stats().dirty_bytes, 4 * kPage);
  EXPECT_TRUE(Lists(cache_->DirtyFiles(absl::ZeroDuration()), shared.data->ino()));
  EXPECT_TRUE(Intact(shared));
  EXPECT_TRUE(Intact(other));
}

// --- Device failures ---

TEST_F(PageCacheTest, FailedFlushKeepsThePagesDirty) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 160 * KiB)).ok());
  ASSERT_TRUE(Write(file, 10, Letters(rng_, 3 * kPage)).ok());
  ASSERT_TRUE(Write(file, 20 * kPage + 1, Letters(rng_, 100)).ok());
  ASSERT_EQ(cache_->Stats().dirty_bytes, 5 * kPage);

  faulty_->SetPlan(FaultPlan{1.0, kFaultWrite, 1});
  absl::Status status = file.data->Flush();
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  PageCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, 5 * kPage);
  EXPECT_EQ(stats.flushed_bytes, 0u);
  EXPECT_TRUE(Lists(cache_->DirtyFiles(absl::ZeroDuration()), file.data->ino()));
  // Reads and writes of dirty pages need no device write.
  EXPECT_TRUE(Intact(file));
  ASSERT_TRUE(Write(file, 2 * kPage + 5, Letters(rng_, 50)).ok());
  // A large write must flush what it overlaps first, and cannot.
  status = Write(file, 0, Letters(rng_, PageCache::kSmallRequest));
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_EQ(cache_->Stats().dirty_bytes, 5 * kPage);
  EXPECT_TRUE(Intact(file));

  faulty_->SetProbability(0);
  ASSERT_TRUE(file.data->Flush().ok());
  stats = cache_->Stats();
  EXPECT_EQ(stats.dirty_bytes, 0u);
  EXPECT_EQ(stats.flushed_bytes, 5 * kPage);
  EXPECT_TRUE(cache_->DirtyFiles(absl::ZeroDuration()).empty());
  EXPECT_TRUE(Intact(file));  // the large read: from the arena alone
}

// Random operations while the device fails now and then: a failure is
// ENOSPC (ResourceExhausted) or EIO (Internal), leaves each byte it was
// changing old or new (a failed punch or truncate may have zeroed part of
// its range), and never changes another file.
TEST_F(PageCacheTest, RandomDeviceFailuresTouchNothingElse) {
  constexpr int kFiles = 3;
  const int kOperations = Scaled(4000);
  const uint64_t seed = Seed();
  SCOPED_TRACE(SeedTrace(seed));
  Make(32 * MiB, 12);
  faulty_->SetPlan(FaultPlan{0, kFaultAll, seed});
  std::mt19937_64 rng(seed);
  const auto random = [&](uint64_t low, uint64_t high) {
    return std::uniform_int_distribution<uint64_t>(low, high)(rng);
  };
  std::vector<TestFile*> files;
  for (int i = 0; i < kFiles; ++i) files.push_back(&NewFile());
  int failures = 0;
  for (int op = 0; op < kOperations; ++op) {
    TestFile& file = *files[random(0, kFiles - 1)];
    TestFile& source = *files[random(0, kFiles - 1)];
    const std::string before = file.content;
    std::string after = before;  // the content if the operation succeeds
    uint64_t offset = random(0, 1) ? random(0, before.size()) : random(0, 512 * KiB);
    uint64_t length = random(0, 5) == 0 ? random(1, 300 * KiB) : random(1, 5 * kPage);
    uint64_t touched_begin = offset, touched_end = offset + length;
    bool zeros_only = false;  // punch and truncate: a touched byte is old or zero
    std::string what;
    faulty_->SetProbability(0.05);
    absl::Status status;
    switch (random(0, 5)) {
      case 0:
      case 1: {
        what = absl::StrFormat("write [%d, +%d)", offset, length);
        const std::string bytes = Letters(rng, length);
        after.resize(std::max<uint64_t>(after.size(), offset + length), '\0');
        after.replace(offset, length, bytes);
        status = file.data->Write(offset, bytes.data(), length, before.size());
        break;
      }
      case 2: {
        if (before.empty()) continue;
        offset = random(0, before.size() - 1);
        length = std::min<uint64_t>(length, before.size() - offset);
        what = absl::StrFormat("read [%d, +%d)", offset, length);
        std::string out(length, '\0');
        status = file.data->Read(offset, length, out.data(), before.size());
        if (status.ok() && out != before.substr(offset, length)) {
          faulty_->SetProbability(0);
          FAIL() << "operation " << op << ", " << what << ": read a wrong byte";
        }
        break;
      }
      case 3: {
        what = "flush";
        status = file.data->Flush();
        break;
      }
      case 4: {
        if (before.empty()) continue;
        zeros_only = true;
        if (random(0, 1)) {
          const uint64_t size = random(0, before.size() - 1);
          what = absl::StrFormat("truncate %d to %d", before.size(), size);
          status = file.data->Truncate(size);
          after.resize(size);
          touched_begin = size;
          touched_end = before.size();
        } else {
          offset = random(0, before.size() - 1);
          length = std::min<uint64_t>(length, before.size() - offset);
          what = absl::StrFormat("punch [%d, +%d)", offset, length);
          status = file.data->PunchHole(offset, length);
          std::fill(after.begin() + offset, after.begin() + offset + length, '\0');
          touched_begin = offset;
          touched_end = offset + length;
        }
        break;
      }
      case 5: {
        if (source.content.empty()) continue;
        const uint64_t in = random(0, source.content.size() - 1);
        length = std::min<uint64_t>(length, source.content.size() - in);
        if (&source == &file && in < offset + length && offset < in + length) continue;
        what = absl::StrFormat("copy [%d, +%d) of ino %d to %d", in, length, source.data->ino(),
                               offset);
        const std::string bytes = source.content.substr(in, length);
        after.resize(std::max<uint64_t>(after.size(), offset + length), '\0');
        after.replace(offset, length, bytes);
        touched_end = offset + length;
        status = file.data->CopyFrom(*source.data, in, source.content.size(), offset, length,
                                     file.content.size());
        break;
      }
    }
    faulty_->SetProbability(0);
    SCOPED_TRACE(absl::StrFormat("operation %d on ino %d: %s: %s", op, file.data->ino(), what,
                                 status.ToString()));
    if (status.ok()) {
      file.content = after;
      continue;
    }
    ++failures;
    ASSERT_TRUE(absl::IsResourceExhausted(status) || absl::IsInternal(status)) << status;
    // What the file holds now, at its old size (the caller keeps the size).
    std::string actual(before.size(), '\0');
    if (!before.empty()) {
      ASSERT_TRUE(file.data->Read(0, before.size(), actual.data(), before.size()).ok());
    }
    for (uint64_t i = 0; i < before.size(); ++i) {
      const bool touched = i >= touched_begin && i < touched_end;
      const char updated = zeros_only ? '\0' : i < after.size() ? after[i] : '\0';
      ASSERT_TRUE(actual[i] == before[i] || (touched && actual[i] == updated))
          << "byte " << i << " (page " << i / kPage << ") is " << Describe(actual[i])
          << ": neither old (" << Describe(before[i]) << ") nor new (" << Describe(updated) << ")";
    }
    file.content = actual;
    for (TestFile* other : files) ASSERT_TRUE(Intact(*other)) << "ino " << other->data->ino();
  }
  // The cases that skip an operation `continue` with faults still on.
  faulty_->SetProbability(0);
  std::printf("%d operations, %llu faults injected, %d operations failed\n", kOperations,
              static_cast<unsigned long long>(faulty_->injected()), failures);
  // About one operation in 25 fails (18 of 400 at the ThreadSanitizer
  // pass's scale, as few as 10 by chance); the bound only proves that faults
  // reach operations.
  EXPECT_GT(failures, kOperations / 200) << "the faults never hit";
  for (TestFile* file : files) ASSERT_TRUE(file->data->Flush().ok());
  for (TestFile* file : files) EXPECT_TRUE(Intact(*file));
}

// A punch that fails on the device must leave a dirty page's bytes as they
// were (or zero): never the older bytes the arena still holds under it.
TEST_F(PageCacheTest, FailedPunchHoleNeverBringsBackOlderBytes) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  const std::string older = Letters(rng_, 2 * kPage);
  ASSERT_TRUE(Write(file, 0, older).ok());
  // One 8 KiB block: a punch inside its first page must zero on the device.
  ASSERT_EQ(arena_->Stats().blocks.allocated_blocks - held_.size(), 1u);
  ASSERT_EQ(file.data->allocated_bytes(), 2 * kPage);
  ASSERT_TRUE(file.data->Flush().ok());
  const std::string newer = Letters(rng_, kPage);
  ASSERT_TRUE(Write(file, 0, newer).ok());  // page 0: dirty, in the cache only

  faulty_->SetPlan(FaultPlan{1.0, kFaultZero, 1});
  const absl::Status status = file.data->PunchHole(1, kPage - 2);
  faulty_->SetProbability(0);
  ASSERT_TRUE(absl::IsInternal(status)) << status;
  std::string actual(kPage, '\0');
  ASSERT_TRUE(file.data->Read(0, kPage, actual.data(), file.content.size()).ok());
  for (uint64_t i = 0; i < kPage; ++i) {
    ASSERT_TRUE(actual[i] == newer[i] || actual[i] == '\0')
        << "byte " << i << " is " << Describe(actual[i]) << ": neither the bytes before the punch ("
        << Describe(newer[i]) << ") nor zero" << (actual[i] == older[i] ? ", but older ones" : "");
  }
}

// A truncate zeroes nothing on the device (bytes past the end of the data
// read as zeros), so even a device failing every zeroing cannot make it fail
// or bring back older bytes, and the cut bytes stay zeros when the file
// grows again.
TEST_F(PageCacheTest, TruncateNeedsNoDeviceZeroingAndNeverBringsBackOlderBytes) {
  Make(16 * MiB, 16);
  TestFile& file = NewFile();
  const std::string older = Letters(rng_, 4 * kPage);
  ASSERT_TRUE(Write(file, 0, older).ok());
  ASSERT_EQ(arena_->Stats().blocks.allocated_blocks - held_.size(), 1u);  // one 16 KiB block
  ASSERT_TRUE(file.data->Flush().ok());
  ASSERT_TRUE(Write(file, 2 * kPage, Letters(rng_, kPage)).ok());  // page 2: dirty
  const std::string newer = file.content;

  const uint64_t cut_at = 2 * kPage + 100;  // inside page 2
  faulty_->SetPlan(FaultPlan{1.0, kFaultZero, 1});
  const absl::Status status = file.data->Truncate(cut_at);
  faulty_->SetProbability(0);
  ASSERT_TRUE(status.ok()) << status;
  std::string actual(newer.size(), '\0');
  ASSERT_TRUE(file.data->Read(0, actual.size(), actual.data(), newer.size()).ok());
  for (uint64_t i = 0; i < newer.size(); ++i) {
    const char expected = i < cut_at ? newer[i] : '\0';
    ASSERT_EQ(actual[i], expected) << "byte " << i << " is " << Describe(actual[i])
                                   << (actual[i] == older[i] ? ", the bytes before the write" : "");
  }
}

// When no staging buffer can be had, a small read falls back to reading its
// range from the arena; the dirty pages it covers are newer than the arena
// there and must still be what it returns: not the older bytes the arena
// holds under them, nor the stale bytes of a block mapped for write-back
// and not yet written (a deleted file's, say).
TEST_F(PageCacheTest, ReadWithoutHostMemoryStillSeesDirtyPages) {
  Make(16 * MiB, 16);
  DirtyArena();
  TestFile& file = NewFile();
  ASSERT_TRUE(Write(file, 0, Letters(rng_, 160 * KiB)).ok());  // arena only
  // A whole page, and a page past the end: neither needs a staging buffer.
  ASSERT_TRUE(Write(file, 0, Letters(rng_, kPage)).ok());
  ASSERT_TRUE(Write(file, 300 * KiB, Letters(rng_, 100)).ok());  // in a new block
  ASSERT_EQ(cache_->Stats().dirty_bytes, 2 * kPage);
  // The frames are had already; from now on no staging buffer is.
  device_->RefuseHostBuffers(true);
  // Each read covers a dirty page (a hit) and a clean one (a miss).
  EXPECT_TRUE(ReadsBack(file, 0, 2 * kPage)) << "older bytes";
  EXPECT_TRUE(ReadsBack(file, 299 * KiB, 2 * kPage)) << "stale bytes";
  ASSERT_GT(device_->refused_host_buffers(), 0u) << "the fallback was not exercised";
  // A flush needs none: the pages go from their frames.
  EXPECT_TRUE(file.data->Flush().ok());
  EXPECT_EQ(cache_->Stats().dirty_bytes, 0u);
  device_->RefuseHostBuffers(false);
  EXPECT_TRUE(Intact(file));
}

}  // namespace
}  // namespace cudafs
