// The mount table's lines (fs/wire/mount_info_line.h).
#include "fs/wire/mount_info_line.h"

#include <sys/sysmacros.h>

#include <optional>
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
    "my\\040models rw,user_id=1000\n"
    "45 43 0:42 / /mnt/my\\040gpu/sub rw - tmpfs tmpfs rw\n"
    "not a mount line\n"
    "46 27 0:43 / /no-separator rw tmpfs tmpfs rw\n"
    "47 27 0:44 / /only-a-type rw - tmpfs\n"
    "48 27 0x:44 / /bad-device rw - tmpfs tmpfs rw\n"
    "x 27 0:45 / /bad-id rw - tmpfs tmpfs rw";

TEST(MountInfoLineTest, ParsesEveryFieldAndUnescapesPathsAndNames) {
  const std::vector<MountInfoLine> mounts = ParseMountInfo(kMountInfo);
  ASSERT_EQ(mounts.size(), 4u) << "malformed lines are skipped";
  EXPECT_EQ(mounts[0], (MountInfoLine{.id = 27, .parent = 1, .device = "0:25",
                                      .dev = makedev(0, 25), .root = "/", .mountpoint = "/",
                                      .options = "rw,relatime", .fstype = "ext4",
                                      .source = "/dev/root", .super_options = "rw"}));
  EXPECT_EQ(mounts[1].mountpoint, "/mnt/my gpu");
  EXPECT_EQ(mounts[1].options, "rw,nosuid,nodev,relatime");
  EXPECT_EQ(mounts[1].super_options, "rw,user_id=0,group_id=0,default_permissions");
  EXPECT_EQ(mounts[2].fstype, "fuse.cudafs") << "after the optional fields";
  EXPECT_EQ(mounts[2].source, "my models");
  EXPECT_EQ(mounts[2].dev, makedev(0, 41));
  EXPECT_EQ(mounts[3].mountpoint, "/mnt/my gpu/sub");
}

TEST(MountInfoLineTest, TypeSourceAndOptionsFollowTheSeparator) {
  EXPECT_TRUE(ParseMountInfoLine("47 27 0:44 / /m rw - tmpfs tmpfs rw").has_value());
  EXPECT_EQ(ParseMountInfoLine("47 27 0:44 / /m rw - tmpfs tmpfs"), std::nullopt);
  EXPECT_EQ(ParseMountInfoLine("47 27 0:44 / /m rw - tmpfs"), std::nullopt);
  EXPECT_EQ(ParseMountInfoLine("47 27 0:44 / /m rw -"), std::nullopt);
  EXPECT_EQ(ParseMountInfoLine("47 27 0:44"), std::nullopt);
  EXPECT_EQ(ParseMountInfoLine(""), std::nullopt);
}

// A bind mount of a directory names it as the mount's root.
TEST(MountInfoLineTest, ABindMountOfADirectoryHasItAsRoot) {
  const std::optional<MountInfoLine> mount = ParseMountInfoLine(
      "50 27 0:40 /jobs/my\\040job /scratch rw - fuse.cudafs cudafs rw,user_id=0");
  ASSERT_TRUE(mount.has_value());
  EXPECT_EQ(mount->root, "/jobs/my job");
  EXPECT_EQ(mount->mountpoint, "/scratch");
}

TEST(MountInfoLineTest, OptionValuesAreFoundByWholeKey) {
  EXPECT_EQ(MountOptionValue("rw,user_id=1000,group_id=0", "user_id"), "1000");
  EXPECT_EQ(MountOptionValue("rw,user_id=1000,group_id=0", "group_id"), "0");
  EXPECT_EQ(MountOptionValue("rw,xuser_id=5,user_id=7", "user_id"), "7");
  EXPECT_EQ(MountOptionValue("rw,user_id", "user_id"), std::nullopt);
  EXPECT_EQ(MountOptionValue("rw", "user_id"), std::nullopt);
  EXPECT_EQ(MountOptionValue("", "user_id"), std::nullopt);
  EXPECT_EQ(MountOptionValue("user_id=", "user_id"), "");
}

TEST(MountInfoLineTest, OctalEscapesAreUndone) {
  EXPECT_EQ(UnescapeMountField("/mnt/gpu"), "/mnt/gpu");
  EXPECT_EQ(UnescapeMountField("/mnt/my\\040gpu"), "/mnt/my gpu");
  EXPECT_EQ(UnescapeMountField("/a\\011b\\012c\\134d"), "/a\tb\nc\\d");
}

TEST(MountInfoLineTest, WhatIsNoEscapeIsKeptAsItIs) {
  EXPECT_EQ(UnescapeMountField("/a\\04"), "/a\\04");
  EXPECT_EQ(UnescapeMountField("/a\\089"), "/a\\089");
  EXPECT_EQ(UnescapeMountField("/a\\"), "/a\\");
  EXPECT_EQ(UnescapeMountField("\\\\040"), "\\ ");
  EXPECT_EQ(UnescapeMountField(""), "");
}

}  // namespace
}  // namespace cudafs
