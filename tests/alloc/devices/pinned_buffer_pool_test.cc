// PinnedBuffer and PinnedBufferPool, the one built on the other: every
// buffer goes back to the device it came from, once, with the size it was
// asked for, and a pool lends each buffer to one taker at a time.
#include "alloc/devices/pinned_buffer_pool.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/pinned_buffer.h"
#include "gtest/gtest.h"
#include "tests/support/recording_device.h"

namespace cudafs {
namespace {

constexpr size_t kPage = 4096;

bool PageAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kPage == 0; }

TEST(PinnedBufferTest, FromTheHostDeviceIsPageAlignedAndOfTheAskedSize) {
  absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(kDefaultGranuleBytes);
  ASSERT_TRUE(device.ok()) << device.status();
  for (size_t size : {size_t{1}, kPage, kPage + 1, size_t{256 << 10} + 1, size_t{kMiB}}) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    PinnedBuffer buffer(device->get(), size);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_TRUE(PageAligned(buffer.data()));
    EXPECT_EQ(buffer.size(), size);
    EXPECT_EQ(buffer.device(), device->get());
    std::memset(buffer.data(), 0xA5, size);  // every byte is writable
  }
}

TEST(PinnedBufferTest, GoesBackToItsDeviceOnceWhenDestroyed) {
  RecordingDevice device;
  void* data = nullptr;
  {
    PinnedBuffer buffer(&device, 5000);
    data = buffer.data();
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(device.SizeOf(data), 5000u);
    EXPECT_EQ(device.frees(), 0);
  }
  EXPECT_FALSE(device.Lent(data));
  EXPECT_EQ(device.frees(), 1);
}

TEST(PinnedBufferTest, MovingHandsTheBufferOver) {
  RecordingDevice device;
  PinnedBuffer first(&device, kPage);
  char* const data = first.data();
  PinnedBuffer second(std::move(first));
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(second.size(), kPage);
  EXPECT_EQ(second.device(), &device);
  EXPECT_EQ(first.data(), nullptr);  // what a move leaves
  EXPECT_EQ(first.size(), 0u);
  EXPECT_EQ(first.device(), nullptr);
  first = PinnedBuffer();
  EXPECT_EQ(device.frees(), 0) << "an emptied buffer freed what it handed over";
  EXPECT_TRUE(device.Lent(data));
}

TEST(PinnedBufferTest, AssigningOverABufferFreesIt) {
  RecordingDevice device;
  PinnedBuffer buffer(&device, kPage);
  char* const old = buffer.data();
  buffer = PinnedBuffer(&device, 2 * kPage);
  EXPECT_FALSE(device.Lent(old));
  EXPECT_EQ(device.frees(), 1);
  EXPECT_TRUE(device.Lent(buffer.data()));
  EXPECT_EQ(buffer.size(), 2 * kPage);
}

TEST(PinnedBufferTest, HoldsNothingWhenTheDeviceHasNoMemory) {
  RecordingDevice device;
  device.RefuseHostBuffers(true);
  {
    PinnedBuffer buffer(&device, kPage);
    EXPECT_EQ(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 0u);
    EXPECT_EQ(buffer.device(), nullptr);
  }
  EXPECT_EQ(device.frees(), 0);  // the recording device fails a free of null
}

TEST(PinnedBufferPoolTest, ReusesABufferGivenBack) {
  RecordingDevice device;
  PinnedBufferPool pool(&device, 3 * kPage);
  EXPECT_EQ(device.allocations(), 0) << "made a buffer before the first Acquire";
  char* const first = pool.Acquire();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(device.SizeOf(first), 3 * kPage);
  EXPECT_TRUE(PageAligned(first));
  pool.Release(first);
  EXPECT_EQ(pool.Acquire(), first);
  EXPECT_EQ(device.allocations(), 1);
  EXPECT_EQ(device.frees(), 0);
  pool.Release(first);
}

TEST(PinnedBufferPoolTest, LendsDistinctBuffersAtOnceAndFreesThemAllWhenDestroyed) {
  RecordingDevice device;
  std::set<char*> lent;
  {
    PinnedBufferPool pool(&device, kPage);
    for (int i = 0; i < 3; ++i) lent.insert(pool.Acquire());
    EXPECT_EQ(lent.size(), 3u);
    EXPECT_FALSE(lent.contains(nullptr));
    for (char* buffer : lent) pool.Release(buffer);
    EXPECT_EQ(device.frees(), 0) << "a buffer given back is kept for the next taker";
    // Three idle buffers serve three takers without a new one.
    std::set<char*> again;
    for (int i = 0; i < 3; ++i) again.insert(pool.Acquire());
    EXPECT_EQ(again, lent);
    EXPECT_EQ(device.allocations(), 3);
    for (char* buffer : again) pool.Release(buffer);
  }
  EXPECT_EQ(device.frees(), 3);
  for (char* buffer : lent) EXPECT_FALSE(device.Lent(buffer));
}

TEST(PinnedBufferPoolTest, AcquireIsNullOnlyWhenNoneIsIdleAndTheDeviceHasNoMemory) {
  RecordingDevice device;
  PinnedBufferPool pool(&device, kPage);
  char* const kept = pool.Acquire();
  ASSERT_NE(kept, nullptr);
  pool.Release(kept);
  device.RefuseHostBuffers(true);
  EXPECT_EQ(pool.Acquire(), kept) << "an idle buffer needs no memory from the device";
  EXPECT_EQ(pool.Acquire(), nullptr);
  device.RefuseHostBuffers(false);
  char* const fresh = pool.Acquire();
  EXPECT_NE(fresh, nullptr);
  EXPECT_NE(fresh, kept);
  pool.Release(fresh);
  pool.Release(kept);
}

// Threads take and give back buffers as fast as they can: no buffer is ever
// lent to two of them at once, and the pool makes no more buffers than there
// are threads. A buffer's first word says who holds it; it is claimed and
// cleared atomically, so checking adds no lock that would keep the threads
// from racing in the pool.
TEST(PinnedBufferPoolTest, LendsEachBufferToOneThreadAtATime) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 1000000;
  RecordingDevice device;
  {
    PinnedBufferPool pool(&device, kPage);
    std::vector<std::thread> threads;
    for (int t = 1; t <= kThreads; ++t) {
      threads.emplace_back([&pool, t] {
        for (int round = 0; round < kRounds; ++round) {
          char* buffer = pool.Acquire();
          ASSERT_NE(buffer, nullptr);
          std::atomic_ref<int> holder(*reinterpret_cast<int*>(buffer));
          int held = 0;
          ASSERT_TRUE(holder.compare_exchange_strong(held, t))
              << "lent to thread " << t << " while thread " << held << " holds it";
          int mine = t;
          ASSERT_TRUE(holder.compare_exchange_strong(mine, 0))
              << "thread " << mine << " took it from thread " << t;
          pool.Release(buffer);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_GE(device.allocations(), 1);
    EXPECT_LE(device.allocations(), kThreads);
  }
  EXPECT_EQ(device.frees(), device.allocations());
}

}  // namespace
}  // namespace cudafs
