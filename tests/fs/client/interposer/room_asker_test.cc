// RoomAsker (fs/client/interposer/room_asker.h): whom it asks, what for,
// and that a daemon that does not answer holds the program no longer
// than the bound.
#include "fs/client/interposer/room_asker.h"

#include <stdlib.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs::client {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

std::vector<CudafsMount> TwoMounts() {
  return {{"/mnt/a", 1000, makedev(0, 50)}, {"/mnt/b", 0, makedev(0, 51)}};
}

struct Asked {
  std::string mountpoint;
  uint64_t bytes;
  std::string gpu;
  bool hold;
};

// An Ask that records what each mount was asked and answers 0.
class Recorder {
 public:
  RoomAsker::Ask ask() {
    return [this](const CudafsMount& mount, const RoomRequest& request) {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.push_back({mount.mountpoint, request.bytes.value_or(0), request.gpu, request.hold});
      return 0;
    };
  }
  std::vector<Asked> asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }

 private:
  std::mutex mu_;
  std::vector<Asked> asked_;
};

TEST(RoomAskerTest, AsksEveryMountForTheRoomOnThatGpu) {
  Recorder recorder;
  RoomAsker asker(recorder.ask(), TwoMounts);
  EXPECT_TRUE(asker.MakeRoomFor("0000:65:00.0", uint64_t{1} << 30));
  std::vector<Asked> asked = recorder.asked();
  ASSERT_EQ(asked.size(), 2u);
  for (const Asked& one : asked) {
    EXPECT_EQ(one.bytes, RoomAsker::RoomFor(uint64_t{1} << 30));
    EXPECT_EQ(one.gpu, "0000:65:00.0");
    EXPECT_FALSE(one.hold);  // a program's room is never held
  }
  // Each on a thread of its own: in any order.
  std::sort(asked.begin(), asked.end(),
            [](const Asked& a, const Asked& b) { return a.mountpoint < b.mountpoint; });
  EXPECT_EQ(asked[0].mountpoint, "/mnt/a");
  EXPECT_EQ(asked[1].mountpoint, "/mnt/b");
}

// Failures that follow each other on one GPU ask for twice the room each
// time; another GPU starts from its own allocation.
TEST(RoomAskerTest, ABurstOfFailuresAsksForMoreEachTime) {
  Recorder recorder;
  RoomAsker asker(recorder.ask(),
                  [] { return std::vector<CudafsMount>{{"/mnt/a", 0, makedev(0, 50)}}; });
  const uint64_t step = uint64_t{1} << 30;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(asker.MakeRoomFor("0000:65:00.0", step));
  EXPECT_TRUE(asker.MakeRoomFor("0000:66:00.0", step));
  // A large allocation amid the burst asks for at least its own room.
  EXPECT_TRUE(asker.MakeRoomFor("0000:65:00.0", 40 * step));
  const std::vector<Asked> asked = recorder.asked();
  ASSERT_EQ(asked.size(), 6u);
  const uint64_t first = RoomAsker::RoomFor(step);
  EXPECT_EQ(asked[0].bytes, first);
  EXPECT_EQ(asked[1].bytes, 2 * first);
  EXPECT_EQ(asked[2].bytes, 4 * first);
  EXPECT_EQ(asked[3].bytes, 8 * first);
  EXPECT_EQ(asked[4].gpu, "0000:66:00.0");
  EXPECT_EQ(asked[4].bytes, first);
  EXPECT_EQ(asked[5].bytes, std::max(RoomAsker::RoomFor(40 * step), 16 * first));
}

TEST(RoomAskerTest, TheRoomAskedHasSlackBesideTheAllocation) {
  EXPECT_GT(RoomAsker::RoomFor(0), 0u);
  EXPECT_GT(RoomAsker::RoomFor(uint64_t{70} << 30), uint64_t{70} << 30);
  EXPECT_LT(RoomAsker::RoomFor(uint64_t{70} << 30), uint64_t{72} << 30);
}

TEST(RoomAskerTest, RetriesOnlyWhereSomeDaemonMadeRoom) {
  for (const auto& [answer, retry] : std::vector<std::pair<int, bool>>{
           {0, true}, {-ENOSPC, true}, {-EOPNOTSUPP, false}, {-EXDEV, false}, {-EIO, false}}) {
    RoomAsker asker([answer = answer](const CudafsMount&, const RoomRequest&) { return answer; },
                    TwoMounts);
    EXPECT_EQ(asker.MakeRoomFor("0000:65:00.0", 4096), retry) << answer;
  }
}

TEST(RoomAskerTest, NoMountNoQuestion) {
  std::atomic<int> asked{0};
  RoomAsker asker(
      [&](const CudafsMount&, const RoomRequest&) {
        ++asked;
        return 0;
      },
      [] { return std::vector<CudafsMount>(); });
  EXPECT_FALSE(asker.MakeRoomFor("0000:65:00.0", 4096));
  EXPECT_EQ(asked, 0);
}

// A daemon that never answers: the program gets the driver's error back
// after the bound, and that daemon is not asked again until it answers.
TEST(RoomAskerTest, ASilentDaemonHoldsTheProgramOnlyForTheBound) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int asked = 0;
  RoomAsker asker(
      [&](const CudafsMount&, const RoomRequest&) {
        std::unique_lock<std::mutex> lock(mu);
        ++asked;
        cv.wait(lock, [&] { return released; });
        return 0;
      },
      [] { return std::vector<CudafsMount>{{"/mnt/a", 0, makedev(0, 50)}}; });
  const auto start = steady_clock::now();
  EXPECT_FALSE(asker.MakeRoomFor("0000:65:00.0", 4096, seconds(1)));
  EXPECT_LT(steady_clock::now() - start, seconds(4));
  // Still out: not asked again, and answered at once.
  const auto again = steady_clock::now();
  EXPECT_FALSE(asker.MakeRoomFor("0000:65:00.0", 4096, seconds(1)));
  EXPECT_LT(steady_clock::now() - again, seconds(1));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(asked, 1);
    released = true;
  }
  cv.notify_all();
  // Once it answers, it is asked again.
  bool retried = false;
  for (int i = 0; i < 100 && !retried; ++i) {
    retried = asker.MakeRoomFor("0000:65:00.0", 4096, seconds(1));
    if (!retried) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(retried);
}

// A hung daemon (another user's mount) keeps no other mount from making
// the room: the program tries again once the bound is over.
TEST(RoomAskerTest, AHungDaemonKeepsNoOtherMountFromMakingRoom) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  RoomAsker asker(
      [&](const CudafsMount& mount, const RoomRequest&) {
        if (mount.mountpoint == "/mnt/b") return 0;
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return released; });
        return -EIO;
      },
      TwoMounts);
  const auto start = steady_clock::now();
  EXPECT_TRUE(asker.MakeRoomFor("0000:65:00.0", 4096, seconds(1)));
  EXPECT_LT(steady_clock::now() - start, seconds(4));
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  // The hung one answers (EIO) and is asked again: both are then asked.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(asker.MakeRoomFor("0000:65:00.0", 4096, seconds(1)));
}

TEST(RoomAskerTest, OnlyTheMountsNamedAreAsked) {
  ASSERT_EQ(setenv("CUDAFS_ROOM_MOUNTS", "/mnt/b/:/elsewhere", 1), 0);
  const std::vector<CudafsMount> chosen = ChosenMounts(TwoMounts());
  unsetenv("CUDAFS_ROOM_MOUNTS");
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].mountpoint, "/mnt/b");
  EXPECT_EQ(ChosenMounts(TwoMounts()).size(), 2u);
}

TEST(RoomAskerTest, TheWaitIsBoundedAsTheEnvironmentSays) {
  for (const auto& [value, seconds] : std::vector<std::pair<const char*, int>>{
           {"5", 5}, {"0", 0}, {"-3", 0}, {"5s", 0}, {"", 0}, {"99999999999", 0}}) {
    setenv("CUDAFS_ROOM_TIMEOUT", value, 1);
    EXPECT_EQ(RoomTimeout().count(), seconds) << value;
  }
  unsetenv("CUDAFS_ROOM_TIMEOUT");
  EXPECT_EQ(RoomTimeout().count(), 0);
}

TEST(RoomAskerTest, TheDaemonTurnsItOff) {
  unsetenv("CUDAFS_MAKE_ROOM");
  EXPECT_FALSE(InterposerDisabled());
  setenv("CUDAFS_MAKE_ROOM", "0", 1);
  EXPECT_TRUE(InterposerDisabled());
  unsetenv("CUDAFS_MAKE_ROOM");
}

// Every cudafs mount whose root is visible, once.
TEST(MountTableTest, CudafsMountsListsEachVisibleRootOnce) {
  std::istringstream table(
      "36 25 0:50 / /mnt/a rw,nosuid - fuse.cudafs cudafs rw,user_id=1000,group_id=1000\n"
      "37 25 0:50 / /mnt/a2 rw - fuse.cudafs cudafs rw,user_id=1000,group_id=1000\n"
      "38 25 0:51 /sub /mnt/bound rw - fuse.cudafs cudafs rw,user_id=0,group_id=0\n"
      "39 25 0:52 / /mnt/tmp rw - tmpfs tmpfs rw\n"
      "40 25 0:53 / /mnt/no\\040owner rw - fuse.cudafs cudafs rw\n"
      "41 25 0:54 / /mnt/c rw - fuse.cudafs gpu rw,user_id=0,group_id=0\n");
  const std::vector<CudafsMount> mounts = CudafsMounts(table);
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].mountpoint, "/mnt/a");
  EXPECT_EQ(mounts[0].owner, 1000u);
  EXPECT_EQ(mounts[0].device, makedev(0, 50));
  EXPECT_EQ(mounts[1].mountpoint, "/mnt/c");
  EXPECT_EQ(mounts[1].device, makedev(0, 54));
}

}  // namespace
}  // namespace cudafs::client
