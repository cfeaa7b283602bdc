// The daemon's questions to the mount table (fs/daemon/mount_info.h);
// reading its lines is fs/wire's (tests/fs/wire/mount_info_line_test.cc).
#include "fs/daemon/mount_info.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

// A second mount on the same directory hides the first; one on a
// directory inside it does not.
TEST(MountInfoTest, CoveredByAMountOnTheSameDirectory) {
  const std::vector<MountInfoLine> mounts = ParseMountInfo(
      "27 1 0:25 / / rw - ext4 /dev/root rw\n"
      "43 27 0:40 / /mnt/gpu rw - fuse.cudafs cudafs rw,user_id=0\n"
      "44 43 0:41 / /mnt/gpu rw - fuse.cudafs other rw,user_id=0\n"
      "45 43 0:42 / /mnt/gpu/sub rw - tmpfs tmpfs rw\n");
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_TRUE(IsCovered(mounts, mounts[1]));
  EXPECT_FALSE(IsCovered(mounts, mounts[2]));
  const std::vector<MountInfoLine> without_top = {mounts[0], mounts[1], mounts[3]};
  EXPECT_FALSE(IsCovered(without_top, mounts[1]));
}

TEST(MountInfoTest, MountAtFindsTheMountOfAPath) {
  const std::optional<MountInfoLine> root = MountAt("/");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->mountpoint, "/");
  const std::optional<MountInfoLine> proc = MountAt("/proc");
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
