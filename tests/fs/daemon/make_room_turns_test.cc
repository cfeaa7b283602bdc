// How often users other than a mount's owner may make room
// (fs/daemon/make_room_turns.h), on a clock the test moves.
#include "fs/daemon/make_room_turns.h"

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "alloc/base/errors.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

class MakeRoomTurnsTest : public ::testing::Test {
 protected:
  absl::Time now_ = absl::FromUnixSeconds(1000);
  MakeRoomTurns turns_{absl::Seconds(10), [this] { return now_; }};
};

TEST_F(MakeRoomTurnsTest, OneRequestPerIntervalForEachUser) {
  ASSERT_TRUE(turns_.Begin(65534).ok());
  turns_.End(65534);
  now_ += absl::Seconds(3);
  const absl::Status again = turns_.Begin(65534);
  EXPECT_EQ(ToErrno(again), EBUSY);
  EXPECT_TRUE(absl::StartsWith(again.message(),
                               "users other than the mount's owner may make room once every 10 s: "
                               "again in 7 s"))
      << again;
  EXPECT_TRUE(turns_.Begin(1000).ok()) << "each user has turns of their own";
  turns_.End(1000);
  now_ += absl::Seconds(7);
  EXPECT_TRUE(turns_.Begin(65534).ok());
  turns_.End(65534);
}

// A request that runs longer than the interval still keeps the next one
// waiting: one at a time.
TEST_F(MakeRoomTurnsTest, OneRequestAtATime) {
  ASSERT_TRUE(turns_.Begin(65534).ok());
  now_ += absl::Seconds(60);
  const absl::Status second = turns_.Begin(65534);
  EXPECT_EQ(ToErrno(second), EBUSY);
  EXPECT_TRUE(
      absl::StartsWith(second.message(), "a make-room request of this user is still running"))
      << second;
  turns_.End(65534);
  EXPECT_TRUE(turns_.Begin(65534).ok());
  turns_.End(65534);
}

}  // namespace
}  // namespace cudafs
