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
    "rw,user_id=0\n"
    "63 22 0:55 / /mnt/fuse rw - fuse.sshfs host: rw\n";

TEST(ClientMountTableTest, TheCudafsMountOfTheDevice) {
  std::istringstream table(kTable);
  std::string mountpoint;
  ASSERT_EQ(FindCudafsMount(table, makedev(0, 54), &mountpoint), 0);
  EXPECT_EQ(mountpoint, "/mnt/gpu one");
}

TEST(ClientMountTableTest, FilesElsewhereAreExdev) {
  for (const dev_t device : {makedev(0, 52), makedev(0, 53), makedev(0, 55), makedev(8, 1)}) {
    std::istringstream table(kTable);
    std::string mountpoint = "untouched";
    EXPECT_EQ(FindCudafsMount(table, device, &mountpoint), -EXDEV)
        << major(device) << ":" << minor(device);
    EXPECT_EQ(mountpoint, "untouched");
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
      "73 22 0:56 / /mnt/c rw - fuse.cudafs cudafs rw\n");
  std::string mountpoint;
  ASSERT_EQ(FindCudafsMount(table, makedev(0, 56), &mountpoint), 0);
  EXPECT_EQ(mountpoint, "/mnt/c");
}

}  // namespace
}  // namespace cudafs::client
