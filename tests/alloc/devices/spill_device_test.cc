#include "alloc/devices/spill_device.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/null_device.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"
#include "tests/support/recording_device.h"

namespace cudafs {
namespace {

using cudafs_test::Eventually;

constexpr uint64_t kGranule = HostDevice::kGranule;
constexpr uint64_t kChunk = 4 * kGranule;

// A GPU stand-in that keeps which host ranges are registered with it.
class RegisteringGpu final : public DeviceWrapper {
 public:
  RegisteringGpu() : DeviceWrapper(std::make_unique<NullDevice>(kGranule)) {}
  void RegisterHostMemory(void* memory, size_t length) override {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(ranges_.emplace(memory, length).second) << "registered twice";
    ++registrations_;
    most_ = std::max(most_, ranges_.size());
  }
  void UnregisterHostMemory(void* memory) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(ranges_.erase(memory), 1u) << "unregistered but not registered";
  }
  std::map<void*, size_t> ranges() const {
    absl::MutexLock lock(&mu_);
    return ranges_;
  }
  int registrations() const {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  // The most ranges registered at once.
  size_t most() const {
    absl::MutexLock lock(&mu_);
    return most_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<void*, size_t> ranges_ ABSL_GUARDED_BY(mu_);
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  size_t most_ ABSL_GUARDED_BY(mu_) = 0;
};

// Nothing pinned ahead unless a test asks, so that what is pinned is what
// the calls asked for; each chunk committed in two slices.
SpillDevice::Options Plain() { return {.chunk = kChunk, .commit_threads = 2, .ahead_chunks = 0}; }
SpillDevice::Options Ahead(int chunks) {
  return {.chunk = kChunk,
          .commit_threads = 2,
          .ahead_chunks = chunks,
          .ahead_idle = absl::Milliseconds(300)};
}

// A spill of `chunks` chunks and a half (the last chunk short) over
// recorded host memory, registered with two GPUs.
struct Spill {
  explicit Spill(uint64_t chunks = 3, SpillDevice::Options options = Plain()) {
    auto recording = std::make_unique<RecordingDevice>(
        HostDevice::Create(chunks * kChunk + 2 * kGranule, HostDevice::Backing::kHugePages)
            .value());
    host = recording.get();
    device = std::make_unique<SpillDevice>(std::move(recording),
                                           std::vector<Device*>{&gpus[0], &gpus[1]}, options);
  }
  ~Spill() {
    for (const std::string& violation : host->violations()) ADD_FAILURE() << violation;
    device.reset();  // and the host device with it
    for (const RegisteringGpu& gpu : gpus) EXPECT_TRUE(gpu.ranges().empty()) << "left registered";
  }
  char* Chunk(size_t c) { return device->HostView(c * kChunk); }
  // Bytes registered (pinned) with the GPUs.
  uint64_t Pinned() const {
    uint64_t bytes = 0;
    for (const auto& [memory, length] : gpus[0].ranges()) bytes += length;
    return bytes;
  }
  // The chunks registered, each checked whole. A chunk registered with one
  // GPU only (pinning ahead, a background thread is between the two calls)
  // shows as kOnOneGpu, so that a poll waits it out and a settled check
  // fails on it.
  static constexpr size_t kOnOneGpu = SIZE_MAX;
  std::vector<size_t> Registered() const {
    const std::map<void*, size_t> first = gpus[0].ranges();
    const std::map<void*, size_t> second = gpus[1].ranges();
    std::vector<size_t> chunks;
    for (const auto& [memory, length] : first) {
      const size_t c = (static_cast<char*>(memory) - device->HostView(0)) / kChunk;
      EXPECT_EQ(length, std::min(kChunk, device->arena_size() - c * kChunk)) << "chunk " << c;
      chunks.push_back(second.contains(memory) ? c : kOnOneGpu);
    }
    for (const auto& [memory, length] : second) {
      if (!first.contains(memory)) chunks.push_back(kOnOneGpu);
    }
    return chunks;
  }
  // How many chunks are registered with both GPUs, or kOnOneGpu while a
  // chunk is registered with one only.
  size_t Count() const {
    const std::vector<size_t> chunks = Registered();
    return absl::c_linear_search(chunks, kOnOneGpu) ? kOnOneGpu : chunks.size();
  }

  RegisteringGpu gpus[2];
  RecordingDevice* host = nullptr;
  std::unique_ptr<SpillDevice> device;
};

TEST(SpillDeviceTest, AGranuleCommitsAndRegistersItsWholeChunkOnce) {
  Spill spill;
  ASSERT_TRUE(spill.device->Commit(kChunk + kGranule, kGranule).ok());
  EXPECT_EQ(spill.Registered(), std::vector<size_t>{1});
  EXPECT_EQ(spill.host->granules_committed(), kChunk / kGranule) << "the chunk, whole";
  const int commits = spill.host->commit_calls();
  ASSERT_TRUE(spill.device->Commit(kChunk, kGranule).ok());
  EXPECT_EQ(spill.host->commit_calls(), commits) << "the chunk was committed already";
  EXPECT_EQ(spill.gpus[0].registrations(), 1);
  EXPECT_EQ(spill.Pinned(), kChunk);
  EXPECT_EQ(spill.device->ready_bytes(), kChunk - 2 * kGranule);

  // Its bytes are plain memory the GPUs copy into.
  spill.device->HostView(kChunk + kGranule)[7] = 'x';
  char byte = 0;
  const DeviceToHost read{&byte, kChunk + kGranule + 7, 1};
  ASSERT_TRUE(spill.device->Read({&read, 1}).ok());
  EXPECT_EQ(byte, 'x');
}

TEST(SpillDeviceTest, AChunkGoesOnlyOnceItIsEmpty) {
  Spill spill;
  ASSERT_TRUE(spill.device->Commit(0, 2 * kGranule).ok());
  ASSERT_TRUE(spill.device->Decommit(0, kGranule).ok());
  EXPECT_EQ(spill.Registered(), std::vector<size_t>{0}) << "a granule of it is still committed";
  EXPECT_EQ(spill.host->committed_granules().size(), kChunk / kGranule);
  ASSERT_TRUE(spill.device->Decommit(kGranule, kGranule).ok());
  EXPECT_TRUE(spill.Registered().empty());
  EXPECT_TRUE(spill.host->committed_granules().empty()) << "the memory went back";
  EXPECT_EQ(spill.Pinned(), 0u);
}

TEST(SpillDeviceTest, ReadyMeansEveryChunkOfTheRangeIsPinned) {
  Spill spill;
  EXPECT_FALSE(spill.device->IsReady(0, kGranule));
  spill.device->KeepReady(kChunk);
  EXPECT_TRUE(spill.device->IsReady(0, kChunk));
  EXPECT_TRUE(spill.device->IsReady(kChunk - kGranule, kGranule));
  EXPECT_FALSE(spill.device->IsReady(kChunk - kGranule, 2 * kGranule)) << "chunk 1 is not";
  EXPECT_FALSE(spill.device->IsReady(0, 0));
  EXPECT_FALSE(spill.device->IsReady(spill.device->arena_size(), kGranule));
  spill.device->KeepReady(0);
  EXPECT_FALSE(spill.device->IsReady(0, kGranule));
}

TEST(SpillDeviceTest, ARangeOverSeveralChunksAndTheShortLastOne) {
  Spill spill;
  const uint64_t size = spill.device->arena_size();
  ASSERT_TRUE(spill.device->Commit(kChunk - kGranule, size - (kChunk - kGranule)).ok());
  EXPECT_EQ(spill.Registered(), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(spill.Pinned(), size);
  EXPECT_EQ(spill.device->ready_bytes(), kChunk - kGranule);
  ASSERT_TRUE(spill.device->Decommit(kChunk - kGranule, size - (kChunk - kGranule)).ok());
  EXPECT_TRUE(spill.Registered().empty());
}

TEST(SpillDeviceTest, WhatTheHostRefusesLeavesNothingCommittedOrRegistered) {
  Spill spill;
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  spill.host->FailCommitsBeyond(0);
  const absl::Status refused = spill.device->Commit(kChunk - kGranule, 2 * kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(spill.Registered(), std::vector<size_t>{0});
  EXPECT_EQ(spill.device->ready_bytes(), kChunk - kGranule)
      << "the granule of chunk 0 the failed range took was given back";
  spill.host->AllowCommits();
  ASSERT_TRUE(spill.device->Decommit(0, kGranule).ok());
  EXPECT_TRUE(spill.Registered().empty());
}

TEST(SpillDeviceTest, ReadyMemoryIsPinnedAheadAFewChunksACallAndLetGo) {
  Spill spill(6);
  const uint64_t wanted = (SpillDevice::kReadyChunks + 1) * kChunk;
  EXPECT_TRUE(spill.device->KeepReady(wanted)) << "more to come";
  EXPECT_EQ(spill.Count(), static_cast<size_t>(SpillDevice::kReadyChunks));
  EXPECT_FALSE(spill.device->KeepReady(wanted)) << "done";
  EXPECT_EQ(spill.Count(), static_cast<size_t>(SpillDevice::kReadyChunks) + 1);
  EXPECT_EQ(spill.Registered().back(), static_cast<size_t>(SpillDevice::kReadyChunks))
      << "the lowest first";
  EXPECT_FALSE(spill.device->KeepReady(wanted));
  EXPECT_EQ(spill.device->ready_bytes(), wanted);
  spill.device->KeepReady(2 * kChunk);
  EXPECT_EQ(spill.Registered(), (std::vector<size_t>{0, 1})) << "the highest went";

  // Data in a ready chunk commits nothing more; emptied, the chunk stays
  // ready while the target wants it.
  const int commits = spill.host->commit_calls();
  ASSERT_TRUE(spill.device->Commit(kGranule, kGranule).ok());
  EXPECT_EQ(spill.host->commit_calls(), commits);
  ASSERT_TRUE(spill.device->Decommit(kGranule, kGranule).ok());
  EXPECT_EQ(spill.Count(), 2u);

  // A smaller target lets the highest go at once.
  spill.device->KeepReady(kChunk);
  EXPECT_EQ(spill.Registered(), std::vector<size_t>{0});
  spill.device->KeepReady(0);
  EXPECT_TRUE(spill.Registered().empty());
}

TEST(SpillDeviceTest, ManyThreadsCommittingInOneChunkPinItOnce) {
  Spill spill(4);
  std::vector<std::thread> threads;
  for (uint64_t g = 0; g < kChunk / kGranule; ++g) {
    threads.emplace_back([&spill, g] {
      EXPECT_TRUE(spill.device->Commit(2 * kChunk + g * kGranule, kGranule).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(spill.host->granules_committed(), kChunk / kGranule);
  EXPECT_EQ(spill.gpus[1].registrations(), 1);
  EXPECT_EQ(spill.device->ready_bytes(), 0u);
  threads.clear();
  for (uint64_t g = 0; g < kChunk / kGranule; ++g) {
    threads.emplace_back([&spill, g] {
      EXPECT_TRUE(spill.device->Decommit(2 * kChunk + g * kGranule, kGranule).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(spill.Registered().empty());
}

TEST(SpillDeviceTest, DestroyedWithDataItUnregistersEverything) {
  Spill spill;
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  spill.device->KeepReady(3 * kChunk);
  EXPECT_EQ(spill.Count(), 4u);
  // ~Spill checks that the GPUs hold no range once the device is gone.
}

// Slices of whole granules fault in whole huge pages only if every chunk
// starts on a huge page boundary.
TEST(SpillDeviceTest, ChunksStartOnHugePageBoundaries) {
  static_assert(kGranule % (2 * kMiB) == 0);
  Spill spill;
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(spill.Chunk(c)) % (2 * kMiB), 0u) << "chunk " << c;
  }
}

TEST(SpillDeviceTest, AChunkIsCommittedOnSeveralThreadsAtOnceEveryGranuleOnce) {
  Spill spill(3, {.chunk = kChunk, .commit_threads = 4, .ahead_chunks = 0});
  spill.host->CloseGate();
  std::thread mover([&] { EXPECT_TRUE(spill.device->Commit(kChunk + kGranule, kGranule).ok()); });
  spill.host->AwaitCallsAtGate(4);  // a slice a granule, all at once
  EXPECT_TRUE(spill.Registered().empty()) << "registered only once committed whole";
  spill.host->OpenGate();
  mover.join();
  EXPECT_EQ(spill.host->commit_calls(), 4);
  EXPECT_EQ(spill.host->committed_granules(), (std::set<uint64_t>{4, 5, 6, 7}));
  EXPECT_EQ(spill.Registered(), std::vector<size_t>{1});
}

// While data arrives the lowest chunks not pinned are pinned ahead of it,
// never more than the bound, so that data reaching a chunk finds it
// ready; once data stops, they go.
TEST(SpillDeviceTest, ChunksArePinnedAheadOfArrivingDataWithinTheBoundAndGoWhenItStops) {
  Spill spill(8, Ahead(2));
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  EXPECT_TRUE(Eventually([&] { return spill.Count() == 3; }));
  EXPECT_EQ(spill.Registered(), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(spill.device->ahead_chunks(), 2);
  for (size_t c = 1; c < 5; ++c) {
    EXPECT_TRUE(Eventually([&] { return spill.device->IsReady(c * kChunk, kChunk); }))
        << "chunk " << c << " is pinned before data reaches it";
    ASSERT_TRUE(spill.device->Commit(c * kChunk, kGranule).ok());
    EXPECT_LE(spill.device->ahead_chunks(), 2);
  }
  EXPECT_TRUE(Eventually([&] { return spill.Count() == 7; }));
  EXPECT_EQ(spill.device->ahead_chunks(), 2);
  EXPECT_TRUE(Eventually([&] {
    return spill.device->ahead_chunks() == 0 && spill.Count() == 5;
  })) << "the chunks pinned ahead went once data stopped";
  EXPECT_LE(spill.gpus[0].most(), 5u + 2u) << "data in five chunks and two ahead, at most";
  EXPECT_EQ(spill.device->ready_bytes(), 5 * (kChunk - kGranule));
  for (size_t c = 0; c < 5; ++c) ASSERT_TRUE(spill.device->Decommit(c * kChunk, kGranule).ok());
  EXPECT_TRUE(spill.Registered().empty());
}

// Ready memory (KeepReady) does not count chunks pinned ahead, and
// keeps what it asked for once they go.
TEST(SpillDeviceTest, ChunksPinnedAheadAreNoPartOfTheReadyMemory) {
  Spill spill(8, Ahead(2));
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  ASSERT_TRUE(Eventually([&] { return spill.device->ahead_chunks() == 2; }));
  ASSERT_TRUE(Eventually([&] { return spill.Count() == 3; }));
  EXPECT_FALSE(spill.device->KeepReady(kChunk));
  EXPECT_EQ(spill.Registered(), (std::vector<size_t>{0, 1, 2, 3}))
      << "the rest of chunk 0 is not a chunk's worth: one more";
  EXPECT_TRUE(Eventually([&] { return spill.Count() == 2; }))
      << "once data stopped, what the target does not want went";
  EXPECT_GE(spill.device->ready_bytes(), kChunk);
}

// The host refusing memory while chunks are pinned ahead: the data that
// found pinned memory stays, the commit that found none fails whole, and
// nothing is left pinned for it.
TEST(SpillDeviceTest, TheHostRefusingMemoryWhileChunksArePinnedAheadLosesNothing) {
  Spill spill(8, Ahead(2));
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  ASSERT_TRUE(Eventually([&] { return spill.Count() == 3; }));
  ASSERT_TRUE(Eventually([&] { return spill.device->ahead_chunks() == 2; }));
  spill.host->FailCommitsBeyond(0);
  ASSERT_TRUE(spill.device->Commit(kChunk, kGranule).ok()) << "pinned ahead: nothing to commit";
  ASSERT_TRUE(spill.device->Commit(2 * kChunk, kGranule).ok());
  const absl::Status refused = spill.device->Commit(3 * kChunk - kGranule, 2 * kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_TRUE(Eventually([&] { return spill.device->ahead_chunks() == 0; }));
  EXPECT_EQ(spill.Registered(), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(spill.device->ready_bytes(), 3 * (kChunk - kGranule))
      << "the granule of chunk 2 the refused range took was given back";
  spill.host->AllowCommits();
  for (size_t c = 0; c < 3; ++c) ASSERT_TRUE(spill.device->Decommit(c * kChunk, kGranule).ok());
  EXPECT_TRUE(Eventually([&] { return spill.Registered().empty(); }));
}

TEST(SpillDeviceTest, DestroyedWhilePinningAheadItUnregistersEverything) {
  Spill spill(8, Ahead(4));
  ASSERT_TRUE(spill.device->Commit(0, kGranule).ok());
  // ~Spill checks that the GPUs hold no range once the device is gone.
}

}  // namespace
}  // namespace cudafs
