// The placement rules (alloc/storage/placement_rules.h) as pure functions
// of places' states: no device, no arena.
#include "alloc/storage/placement_rules.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

using Parts = std::vector<size_t>;

PlaceState Gpu(uint64_t free_blocks, std::optional<Device::GpuMemory> memory = std::nullopt) {
  return PlaceState{.free = free_blocks, .gpu = memory};
}
PlaceState Host(uint64_t free_blocks) {
  PlaceState place;
  place.spill = true;
  place.free = free_blocks;
  return place;
}
Device::GpuMemory Memory(uint64_t free, uint64_t reserve) {
  Device::GpuMemory memory;
  memory.free = free;
  memory.total = 80 * kGiB;
  memory.reserve = reserve;
  return memory;
}

TEST(PlacementRulesTest, AFileStartsOnTheEmptiestGpuNotHeldBackNeverInHostMemory) {
  std::vector<PlaceState> places = {Gpu(4 * kGiB), Gpu(6 * kGiB), Host(100 * kGiB)};
  EXPECT_EQ(placement::Home(places), 1u);
  places[1].held_back = true;
  EXPECT_EQ(placement::Home(places), 0u);
  places[0].free = 0;
  EXPECT_EQ(placement::Home(places), 0u) << "no GPU has room: the first, never host memory";
  EXPECT_EQ(placement::GpuCount(places), 2u);
}

TEST(PlacementRulesTest, LargeExtentsStripeOverTheGpusFromTheHome) {
  const uint64_t max_extent = 32 * kMiB;
  EXPECT_EQ(placement::Stripe(1, 0, max_extent, max_extent, 3), 1u);
  EXPECT_EQ(placement::Stripe(1, max_extent, max_extent, max_extent, 3), 2u);
  EXPECT_EQ(placement::Stripe(1, 2 * max_extent, max_extent, max_extent, 3), 0u);
  EXPECT_EQ(placement::Stripe(1, 2 * max_extent, kMiB, max_extent, 3), 1u) << "small: home";
  EXPECT_EQ(placement::Stripe(3, max_extent, max_extent, max_extent, 3), 3u)
      << "a file whose home is host memory stays there";
}

TEST(PlacementRulesTest, FallbacksAreTheEmptiestGpusThenHostMemoryThenPlacesHeldBack) {
  std::vector<PlaceState> places = {Gpu(1 * kGiB), Gpu(5 * kGiB), Gpu(3 * kGiB), Host(90 * kGiB)};
  EXPECT_EQ(placement::Fallbacks(places, 0), (Parts{1, 2, 3}));
  EXPECT_EQ(placement::Fallbacks(places, std::nullopt), (Parts{1, 2, 0, 3}));
  places[1].held_back = true;
  EXPECT_EQ(placement::Fallbacks(places, 2), (Parts{0, 3, 1}));
}

TEST(PlacementRulesTest, AGpuBelowItsReserveIsFreedHalfAReservePastIt) {
  EXPECT_EQ(placement::Excess(Memory(10 * kGiB, 8 * kGiB)), 0u);
  EXPECT_EQ(placement::Excess(Memory(8 * kGiB, 8 * kGiB)), 0u);
  EXPECT_EQ(placement::Excess(Memory(5 * kGiB, 8 * kGiB)), 3 * kGiB + 4 * kGiB);
  EXPECT_EQ(placement::Excess(Memory(0, 0)), 0u) << "reserve=0: nothing ever moves";
}

TEST(PlacementRulesTest, DataComesBackOnlyIntoRoomPastTheReserveAndTheMargin) {
  EXPECT_EQ(placement::Room(Memory(12 * kGiB, 8 * kGiB)), 0u);
  EXPECT_EQ(placement::Room(Memory(13 * kGiB, 8 * kGiB)), kGiB);
  EXPECT_EQ(placement::Room(Memory(40 * kGiB, 8 * kGiB)), 28 * kGiB);
  EXPECT_TRUE(placement::Near(Memory(15 * kGiB, 8 * kGiB)));
  EXPECT_FALSE(placement::Near(Memory(16 * kGiB, 8 * kGiB)));
}

TEST(PlacementRulesTest, DataLeavingAGpuGoesToTheRoomiestOtherGpuThenUnseenOnesThenHost) {
  const std::vector<PlaceState> places = {
      Gpu(0, Memory(2 * kGiB, 8 * kGiB)),   // under pressure
      Gpu(0, Memory(20 * kGiB, 8 * kGiB)),  // room 12 GiB
      Gpu(0),                               // no context: unseen
      Gpu(0, Memory(11 * kGiB, 8 * kGiB)),  // within the margin: no room
      Gpu(0, Memory(30 * kGiB, 8 * kGiB)),  // room 22 GiB
      Host(100 * kGiB)};
  EXPECT_EQ(placement::MoveDestinations(places, 0), (Parts{4, 1, 2, 5}));
  EXPECT_EQ(placement::MoveDestinations(places, 4), (Parts{1, 2, 5}))
      << "the GPU under pressure has no room, nor the one within its margin";
}

TEST(PlacementRulesTest, RoomMadeOnDemandSendsDataToHostMemory) {
  const std::vector<PlaceState> places = {Gpu(0, Memory(30 * kGiB, 8 * kGiB)), Gpu(0), Host(0)};
  EXPECT_EQ(placement::RoomDestinations(places), (Parts{2}));
  EXPECT_EQ(placement::RoomDestinations({Gpu(0)}), Parts{}) << "no host memory: nowhere";
}

TEST(PlacementRulesTest, DataInHostMemoryGoesBackHomeFirst) {
  const std::vector<PlaceState> places = {Gpu(0), Gpu(0), Gpu(0), Host(0)};
  EXPECT_EQ(placement::ReturnDestinations(places, 1), (Parts{1, 0, 2}));
  EXPECT_EQ(placement::ReturnDestinations(places, 3), (Parts{0, 1, 2}))
      << "a file started in host memory goes to any GPU";
}

TEST(PlacementRulesTest, HostMemoryIsKeptReadyOnlyNearTheReserveAndNoMoreThanTheGpusHold) {
  std::vector<PlaceState> places = {Gpu(0, Memory(40 * kGiB, 8 * kGiB)),
                                    Gpu(0, Memory(10 * kGiB, 512 * kMiB)), Host(0)};
  EXPECT_EQ(placement::ReadyTarget(places, std::nullopt, 50 * kGiB), 0u) << "both calm";
  places[0].gpu = Memory(12 * kGiB, 8 * kGiB);
  EXPECT_EQ(placement::ReadyTarget(places, std::nullopt, 50 * kGiB), placement::kNearReady)
      << "near: its reserve, up to the cap";
  places[0].gpu = Memory(700 * kMiB, 512 * kMiB);
  EXPECT_EQ(placement::ReadyTarget(places, std::nullopt, 50 * kGiB), 512 * kMiB);
  EXPECT_EQ(placement::ReadyTarget(places, std::nullopt, 100 * kMiB), 100 * kMiB)
      << "never more than the GPUs hold";
  EXPECT_EQ(placement::ReadyTarget(places, 40 * kGiB, 50 * kGiB), 40 * kGiB) << "spill_ready=";
  EXPECT_EQ(placement::ReadyTarget(places, 40 * kGiB, 0), 0u);
}

}  // namespace
}  // namespace cudafs
