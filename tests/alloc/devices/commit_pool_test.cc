// CommitPool (alloc/devices/commit_pool.h) over recorded host memory: a
// range is committed in disjoint slices on several threads at once, every
// granule exactly once, and a slice refused leaves nothing committed.
#include "alloc/devices/commit_pool.h"

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "alloc/devices/host_device.h"
#include "gtest/gtest.h"
#include "tests/support/recording_device.h"

namespace cudafs {
namespace {

constexpr uint64_t kGranule = HostDevice::kGranule;

struct Recorded {
  explicit Recorded(uint64_t granules) : device(HostDevice::Create(granules * kGranule).value()) {}
  ~Recorded() {
    for (const std::string& violation : device.violations()) ADD_FAILURE() << violation;
  }
  std::set<uint64_t> Granules(uint64_t from, uint64_t to) const {
    std::set<uint64_t> granules;
    for (uint64_t g = from; g < to; ++g) granules.insert(g);
    return granules;
  }
  RecordingDevice device;
};

TEST(CommitPoolTest, SlicesCommitAtOnceOnAsManyThreadsAndCoverTheRangeOnce) {
  Recorded host(16);
  CommitPool pool(4);
  host.device.CloseGate();
  std::thread caller(
      [&] { EXPECT_TRUE(pool.Commit(&host.device, 2 * kGranule, 10 * kGranule, kGranule).ok()); });
  host.device.AwaitCallsAtGate(4);  // all four slices are being committed at once
  host.device.OpenGate();
  caller.join();
  EXPECT_EQ(host.device.commit_calls(), 4);
  EXPECT_EQ(host.device.granules_committed(), 10u);
  EXPECT_EQ(host.device.committed_granules(), host.Granules(2, 12))
      << "every granule of the range, none outside it";
}

TEST(CommitPoolTest, ARangeOfFewerUnitsThanThreadsTakesAThreadAUnit) {
  Recorded host(8);
  CommitPool pool(8);
  ASSERT_TRUE(pool.Commit(&host.device, 0, 3 * kGranule, kGranule).ok());
  EXPECT_EQ(host.device.commit_calls(), 3);
  ASSERT_TRUE(pool.Commit(&host.device, 3 * kGranule, kGranule, kGranule).ok());
  EXPECT_EQ(host.device.commit_calls(), 4) << "one unit: one call, on the caller's thread";
  EXPECT_EQ(host.device.committed_granules(), host.Granules(0, 4));
}

TEST(CommitPoolTest, ARefusedSliceLeavesNothingOfTheRangeCommitted) {
  Recorded host(8);
  CommitPool pool(4);
  host.device.FailCommitsBeyond(2);  // two slices of one granule go through, two do not
  const absl::Status refused = pool.Commit(&host.device, 0, 4 * kGranule, kGranule);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(host.device.commit_calls(), 2);
  EXPECT_TRUE(host.device.committed_granules().empty()) << "the slices that went through went back";
  host.device.AllowCommits();
  ASSERT_TRUE(pool.Commit(&host.device, 0, 4 * kGranule, kGranule).ok());
  EXPECT_EQ(host.device.committed_granules(), host.Granules(0, 4));
}

TEST(CommitPoolTest, CallersAtOnceShareThePool) {
  Recorded host(64);
  CommitPool pool(3);
  std::vector<std::thread> callers;
  for (uint64_t i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      EXPECT_TRUE(pool.Commit(&host.device, i * 8 * kGranule, 8 * kGranule, kGranule).ok());
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(host.device.committed_granules(), host.Granules(0, 64));
  EXPECT_EQ(host.device.commit_calls(), 8 * 3);
}

}  // namespace
}  // namespace cudafs
