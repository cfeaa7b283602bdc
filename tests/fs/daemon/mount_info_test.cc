#include "fs/daemon/mount_info.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr char kMountInfo[] =
    "27 1 0:25 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
    "43 27 0:40 / /mnt/my\\040gpu rw,nosuid,nodev,relatime - fuse.cudafs cudafs "
    "rw,user_id=0,group_id=0,default_permissions\n"
    "44 43 0:41 / /mnt/my\\040gpu rw,nosuid,nodev,relatime shared:7 master:2 - fuse.cudafs "
    "other rw,user_id=0\n"
    "45 43 0:42 / /mnt/my\\040gpu/sub rw - tmpfs tmpfs rw\n"
    "not a mount line\n"
    "46 27 0:43 / /no-separator rw tmpfs tmpfs rw\n";

TEST(MountInfoTest, ParsesLinesAndUnescapesPaths) {
  const std::vector<MountInfoEntry> mounts = ParseMountInfo(kMountInfo);
  ASSERT_EQ(mounts.size(), 4u) << "malformed lines are skipped";
  EXPECT_EQ(mounts[0], (MountInfoEntry{.id = 27, .parent = 1, .device = "0:25",
                                       .root = "/", .mountpoint = "/", .fstype = "ext4"}));
  EXPECT_EQ(mounts[1], (MountInfoEntry{.id = 43, .parent = 27, .device = "0:40", .root = "/",
                                       .mountpoint = "/mnt/my gpu", .fstype = "fuse.cudafs"}));
  EXPECT_EQ(mounts[2].fstype, "fuse.cudafs") << "after the optional fields";
  EXPECT_EQ(mounts[3].mountpoint, "/mnt/my gpu/sub");
}

// A bind mount of a directory names it as the mount's root.
TEST(MountInfoTest, ABindMountOfADirectoryHasItAsRoot) {
  const std::vector<MountInfoEntry> mounts =
      ParseMountInfo("50 27 0:40 /jobs/my\\040job /scratch rw - fuse.cudafs cudafs rw,user_id=0\n");
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].root, "/jobs/my job");
  EXPECT_EQ(mounts[0].mountpoint, "/scratch");
}

// A second mount on the same directory hides the first; one on a
// directory inside it does not.
TEST(MountInfoTest, CoveredByAMountOnTheSameDirectory) {
  const std::vector<MountInfoEntry> mounts = ParseMountInfo(kMountInfo);
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_TRUE(IsCovered(mounts, mounts[1]));
  EXPECT_FALSE(IsCovered(mounts, mounts[2]));
  const std::vector<MountInfoEntry> without_top = {mounts[0], mounts[1], mounts[3]};
  EXPECT_FALSE(IsCovered(without_top, mounts[1]));
}

TEST(MountInfoTest, MountAtFindsTheMountOfAPath) {
  const std::optional<MountInfoEntry> root = MountAt("/");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->mountpoint, "/");
  const std::optional<MountInfoEntry> proc = MountAt("/proc");
  ASSERT_TRUE(proc.has_value());
  EXPECT_EQ(proc->fstype, "proc");
  const int fd = open("/proc", O_PATH | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(MountIdOf(fd), proc->id);
  close(fd);
  EXPECT_EQ(MountAt("/does/not/exist"), std::nullopt);
}

TEST(MountInfoTest, OnlyTheTopDirectoryOfAMountIsItsRoot) {
  EXPECT_TRUE(IsMountRoot("/"));
  EXPECT_TRUE(IsMountRoot("/proc"));
  EXPECT_FALSE(IsMountRoot("/proc/self"));
  EXPECT_FALSE(IsMountRoot("/does/not/exist"));
}

}  // namespace
}  // namespace cudafs
