// Who may connect to the share service (fs/share/peer_access.h): FUSE's
// rule as a table, and the peer's credentials read from a socketpair.
#include "fs/share/peer_access.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "alloc/base/errors.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

ShareSettings Settings(uid_t owner, bool allow_other, bool allow_root) {
  ShareSettings settings;
  settings.owner = owner;
  settings.allow_other = allow_other;
  settings.allow_root = allow_root;
  return settings;
}

TEST(SharePeerAccessTest, FuseRule) {
  struct Case {
    uid_t uid;
    uid_t owner;
    bool allow_other;
    bool allow_root;
    bool allowed;
  };
  for (const Case& c : {
           Case{1000, 1000, false, false, true},   // the owner
           Case{1001, 1000, false, false, false},  // another user
           Case{0, 1000, false, false, false},     // root, not asked for
           Case{0, 1000, false, true, true},       // allow_root
           Case{1001, 1000, false, true, false},   // allow_root lets no one else in
           Case{1001, 1000, true, false, true},    // allow_other
           Case{0, 1000, true, false, true}, Case{0, 0, false, false, true},  // root's own mount
       }) {
    EXPECT_EQ(ShareAllowed(c.uid, Settings(c.owner, c.allow_other, c.allow_root)), c.allowed)
        << "uid " << c.uid << " owner " << c.owner << " allow_other " << c.allow_other
        << " allow_root " << c.allow_root;
  }
}

class ShareAuthorizePeerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, ends_), 0); }
  void TearDown() override {
    close(ends_[0]);
    close(ends_[1]);
  }
  int ends_[2];
};

TEST_F(ShareAuthorizePeerTest, TheOwnerIsLetIn) {
  const absl::StatusOr<uid_t> uid = AuthorizePeer(ends_[1], Settings(getuid(), false, false));
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, getuid());
}

TEST_F(ShareAuthorizePeerTest, OthersHearEaccesInWords) {
  const absl::StatusOr<uid_t> uid = AuthorizePeer(ends_[1], Settings(getuid() + 1, false, false));
  ASSERT_FALSE(uid.ok());
  EXPECT_EQ(ToErrno(uid.status()), EACCES);
  EXPECT_NE(std::string(uid.status().message()).find("allow_other"), std::string::npos)
      << uid.status();
}

TEST_F(ShareAuthorizePeerTest, AllowOtherLetsOthersIn) {
  const absl::StatusOr<uid_t> uid = AuthorizePeer(ends_[1], Settings(getuid() + 1, true, false));
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, getuid());
}

// Credentials come from the socket, so a descriptor that is none is no
// peer at all.
TEST(ShareAuthorizePeerOfNoSocketTest, IsRefused) {
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  EXPECT_EQ(ToErrno(AuthorizePeer(ends[0], Settings(getuid(), true, true)).status()), EACCES);
  close(ends[0]);
  close(ends[1]);
}

}  // namespace
}  // namespace cudafs
