// The write-back policy (cache/write_back_flusher.h) over a real PageCache
// and arena: aged dirty pages reach the arena on the flusher's own, young
// ones wait for their interval unless half the cache is dirty, destroying
// the flusher writes back everything, and a device that keeps failing is
// reported once per run of failures and retried once per interval, not in
// a loop.
#include "cache/write_back_flusher.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "cache/cached_file.h"
#include "cache/page_cache.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"

namespace cudafs {
namespace {

constexpr uint64_t kPage = PageCache::kPageSize;
constexpr uint64_t kCachePages = 16;
constexpr uint64_t kIno = 7;
constexpr absl::Duration kNever = absl::Hours(1);
// How long a test waits for what should come much sooner (a loaded CI
// machine can stall a thread for a while).
constexpr absl::Duration kPatience = absl::Seconds(20);

int Count(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

class WriteBackFlusherTest : public testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HostDevice>> host = HostDevice::Create(16 << 20);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    faulty_ = std::make_unique<FaultyDevice>(host_.get());
    arena_ = std::make_unique<Arena>(faulty_.get(), 4096);
    cache_ = std::make_unique<PageCache>(faulty_.get(), kCachePages * kPage);
    absl::MutexLock lock(&mu_);
    space_ = std::make_unique<CachedFile::Space>(cache_.get(), arena_.get(), 1 << 20);
    file_ = std::make_unique<CachedFile>(space_.get(), kIno);
  }

  void TearDown() override {
    flusher_.reset();
    absl::MutexLock lock(&mu_);
    file_.reset();
  }

  // Starts flushing, as the filesystem core does: the file's lock, then
  // Flush.
  void Start(absl::Duration interval) {
    flusher_ = std::make_unique<WriteBackFlusher>(
        cache_.get(),
        [this](uint64_t ino) {
          EXPECT_EQ(ino, kIno);
          ++flushes_;
          absl::MutexLock lock(&mu_);
          return file_->Flush();
        },
        interval);
  }

  // Dirties `pages` whole pages from `first` on, one small write each.
  void Dirty(uint64_t first, uint64_t pages) {
    const std::string bytes(kPage, 'x');
    absl::MutexLock lock(&mu_);
    for (uint64_t index = first; index < first + pages; ++index) {
      ASSERT_TRUE(file_->Write(index * kPage, bytes.data(), kPage, size_).ok());
      size_ = std::max(size_, (index + 1) * kPage);
    }
  }

  uint64_t DirtyBytes() const { return cache_->Stats().dirty_bytes; }

  // Whether the cache is clean within kPatience.
  bool BecomesClean() const {
    return cudafs_test::Eventually([&] { return DirtyBytes() == 0; },
                                   absl::ToChronoMilliseconds(kPatience));
  }

  std::unique_ptr<HostDevice> host_;
  std::unique_ptr<FaultyDevice> faulty_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PageCache> cache_;
  std::unique_ptr<CachedFile::Space> space_;
  absl::Mutex mu_;  // the file's lock, as an inode's
  std::unique_ptr<CachedFile> file_ ABSL_GUARDED_BY(mu_);
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<WriteBackFlusher> flusher_;
  std::atomic<int> flushes_{0};
};

TEST_F(WriteBackFlusherTest, AgedPagesReachTheArena) {
  constexpr absl::Duration kInterval = absl::Milliseconds(100);
  Start(kInterval);
  // Half an interval in, so the flusher's first round finds the page young.
  absl::SleepFor(kInterval / 2);
  const absl::Time written = absl::Now();
  Dirty(0, 1);
  ASSERT_TRUE(BecomesClean()) << "a dirty page stayed in the cache for " << kPatience;
  // Not before the page was an interval old.
  EXPECT_GE(absl::Now() - written, kInterval);
  EXPECT_EQ(cache_->Stats().flushed_bytes, kPage);
}

TEST_F(WriteBackFlusherTest, YoungPagesWaitForTheirInterval) {
  Start(kNever);
  Dirty(0, 2);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(DirtyBytes(), 2 * kPage);
  EXPECT_EQ(flushes_, 0);
}

TEST_F(WriteBackFlusherTest, StoppingWritesEverythingBack) {
  Start(kNever);
  Dirty(3, 2);
  ASSERT_EQ(DirtyBytes(), 2 * kPage);
  // Returns at once, though the thread waits for an hour.
  flusher_.reset();
  EXPECT_EQ(DirtyBytes(), 0u);
  EXPECT_EQ(cache_->Stats().flushed_bytes, 2 * kPage);
  EXPECT_EQ(flushes_, 1);
}

TEST_F(WriteBackFlusherTest, HalfTheCacheDirtyFlushesAtOnce) {
  Start(kNever);
  Dirty(0, kCachePages / 2 + 1);
  EXPECT_TRUE(BecomesClean()) << "the flusher did not wake for pressure";
}

TEST_F(WriteBackFlusherTest, FailingDeviceIsReportedOnceAndNotSpunOn) {
  constexpr absl::Duration kInterval = absl::Milliseconds(20);
  constexpr absl::Duration kFailing = absl::Milliseconds(400);
  constexpr char kLine[] = "write-back of inode 7";
  faulty_->SetPlan(FaultPlan{1.0, kFaultWrite, 1});
  testing::internal::CaptureStderr();
  Start(kInterval);
  // Under pressure, which would retry at once but for the pause.
  Dirty(0, kCachePages / 2 + 1);
  absl::SleepFor(kFailing);
  const int failed_flushes = flushes_;
  EXPECT_EQ(DirtyBytes(), (kCachePages / 2 + 1) * kPage);

  // A success ends the run of failures; the next failure is reported anew.
  faulty_->SetProbability(0);
  ASSERT_TRUE(BecomesClean());
  faulty_->SetProbability(1.0);
  Dirty(0, kCachePages / 2 + 1);
  int flushes_before = flushes_;
  cudafs_test::Eventually([&] { return flushes_ >= flushes_before + 2; },
                          absl::ToChronoMilliseconds(kPatience));
  faulty_->SetProbability(0);
  flusher_.reset();
  const std::string log = testing::internal::GetCapturedStderr();

  EXPECT_GE(failed_flushes, 2) << "the flusher gave up on failing pages";
  // One try per interval, with room for a slow machine; a loop that does
  // not pause makes thousands.
  EXPECT_LE(failed_flushes, 2 * (kFailing / kInterval)) << "the flusher spun on failing pages";
  EXPECT_EQ(Count(log, kLine), 2) << log;
  EXPECT_EQ(DirtyBytes(), 0u);
}

}  // namespace
}  // namespace cudafs
