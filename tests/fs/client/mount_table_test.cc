// Finding a file's cudafs mount in a mount table (fs/client/mount_table.h),
// from mountinfo lines written here.
#include "fs/client/mount_table.h"

#include <sys/sysmacros.h>

#include <cerrno>
#include <sstream>
#include <string>

#include "fs/client/client_error.h"
#include "gtest/gtest.h"

namespace cudafs::client {
namespace {

constexpr char kTable[] =
    "22 1 0:21 / /proc rw,nosuid shared:13 - proc proc rw\n"
    "60 22 0:52 / /mnt/tmp rw - tmpfs tmpfs rw\n"
    // Same device numbers as the cudafs below, another type: not it.
    "61 22 0:53 / /mnt/other rw - fuse.cudafsx cudafs rw\n"
    // Optional fields before the separator.
    "62 22 0:54 / /mnt/gpu\\040one rw,nosuid,nodev shared:40 master:2 - fuse.cudafs cudafs "
    "rw,user_id=1000,group_id=1000\n"
    "63 22 0:55 / /mnt/fuse rw - fuse.sshfs host: rw\n";

TEST(ClientMountTableTest, TheCudafsMountOfTheDeviceAndItsOwner) {
  std::istringstream table(kTable);
  CudafsMount mount;
  ASSERT_EQ(FindCudafsMount(table, makedev(0, 54), &mount), 0) << LastError();
  EXPECT_EQ(mount.mountpoint, "/mnt/gpu one");
  EXPECT_EQ(mount.owner, 1000u);
}

TEST(ClientMountTableTest, FilesElsewhereAreExdev) {
  for (const dev_t device : {makedev(0, 52), makedev(0, 53), makedev(0, 55), makedev(8, 1)}) {
    std::istringstream table(kTable);
    CudafsMount mount;
    mount.mountpoint = "untouched";
    EXPECT_EQ(FindCudafsMount(table, device, &mount), -EXDEV)
        << major(device) << ":" << minor(device);
    EXPECT_EQ(mount.mountpoint, "untouched");
    EXPECT_STREQ(LastError(), "the file is not on a cudafs mount");
  }
}

TEST(ClientMountTableTest, MalformedLinesAreSkipped) {
  std::istringstream table(
      "\n"
      "garbage\n"
      "70 22 0:56\n"
      "71 22 0:56 / /mnt/a rw fuse.cudafs\n"    // no separator
      "72 22 0:56 / /mnt/b rw - fuse.cudafs\n"  // type last, nothing after
      "73 22 0:56 / /mnt/c rw - fuse.cudafs cudafs rw,user_id=0\n");
  CudafsMount mount;
  ASSERT_EQ(FindCudafsMount(table, makedev(0, 56), &mount), 0) << LastError();
  EXPECT_EQ(mount.mountpoint, "/mnt/c");
  EXPECT_EQ(mount.owner, 0u);
}

// The attack of a directory's owner: behind a bind mount of their
// directory its attributes pass for the root's. The mount of the root is
// the one asked, wherever it is listed.
TEST(ClientMountTableTest, ABindMountOfADirectoryIsPassedOverForTheRoot) {
  std::istringstream table(
      "80 22 0:57 /home/eve /scratch rw - fuse.cudafs cudafs rw,user_id=0\n"
      "81 22 0:57 / /mnt/gpu rw - fuse.cudafs cudafs rw,user_id=0\n");
  CudafsMount mount;
  ASSERT_EQ(FindCudafsMount(table, makedev(0, 57), &mount), 0) << LastError();
  EXPECT_EQ(mount.mountpoint, "/mnt/gpu");
}

// In a container that sees only a bind mount of a directory, there is no
// root to ask: an error that says so, rather than asking the directory.
TEST(ClientMountTableTest, OnlyABindMountOfADirectoryIsExdevSayingWhy) {
  std::istringstream table(
      "80 22 0:57 /home/eve /scratch\\040dir rw - fuse.cudafs cudafs "
      "rw,user_id=0\n");
  CudafsMount mount;
  EXPECT_EQ(FindCudafsMount(table, makedev(0, 57), &mount), -EXDEV);
  EXPECT_EQ(mount.mountpoint, "");
  EXPECT_NE(std::string(LastError())
                .find("root is not visible here, only a bind mount of a "
                      "directory in it (/scratch dir)"),
            std::string::npos)
      << LastError();
}

// Who mounted is whom the daemon's socket must be served by: without
// user_id= (never so from the kernel) the mount is not trusted.
TEST(ClientMountTableTest, AMountWithoutAnOwnerIsExdev) {
  for (const char* options : {"rw", "rw,user_id=", "rw,user_id=12x", "rw,group_id=0"}) {
    std::istringstream table(std::string("90 22 0:58 / /mnt/gpu rw - fuse.cudafs cudafs ") +
                             options + "\n");
    CudafsMount mount;
    EXPECT_EQ(FindCudafsMount(table, makedev(0, 58), &mount), -EXDEV) << options;
    EXPECT_STREQ(LastError(), "the mount table names no owner of the cudafs mount at /mnt/gpu");
  }
}

}  // namespace
}  // namespace cudafs::client
