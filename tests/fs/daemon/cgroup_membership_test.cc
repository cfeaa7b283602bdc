#include "fs/daemon/cgroup_membership.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cudafs {
namespace {

using Joins = std::vector<std::string>;

constexpr char kUnified[] =
    "30 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate\n";

TEST(CgroupJoinsTest, JoinsTheOtherProcesssV2Cgroup) {
  EXPECT_EQ(CgroupJoins("0::/system.slice/apt-daily-upgrade.service\n",
                        "0::/system.slice/mnt-gpu.mount\n", kUnified),
            (Joins{"/sys/fs/cgroup/system.slice/mnt-gpu.mount/cgroup.procs"}));
  EXPECT_EQ(CgroupJoins("0::/user.slice/a\n", "0::/user.slice/a\n", kUnified), Joins{})
      << "already there";
  EXPECT_EQ(CgroupJoins("0::/a\n", "0::/b\n", ""), Joins{}) << "no cgroup2 mounted";
  EXPECT_EQ(CgroupJoins("0::/a\n", "", kUnified), Joins{}) << "nothing to join";
}

// Hybrid: v1 hierarchies, one per controller or name=, co-mounted ones
// (cpu,cpuacct) included, beside an unused v2 one.
TEST(CgroupJoinsTest, JoinsEveryV1HierarchyWhereTheyDiffer) {
  const std::string mountinfo =
      "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "39 30 0:36 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  const std::string ours =
      "9:name=systemd:/system.slice/apt.service\n4:memory:/system.slice/apt.service\n"
      "2:cpu,cpuacct:/\n1:freezer:/\n0::/\n";
  const std::string theirs =
      "9:name=systemd:/system.slice/mnt-gpu.mount\n4:memory:/jobs/7\n2:cpu,cpuacct:/\n"
      "1:freezer:/frozen\n0::/\n";
  EXPECT_EQ(CgroupJoins(ours, theirs, mountinfo),
            (Joins{"/sys/fs/cgroup/memory/jobs/7/cgroup.procs",
                   "/sys/fs/cgroup/systemd/system.slice/mnt-gpu.mount/cgroup.procs"}))
      << "the freezer hierarchy is not mounted here";
}

// A container mounts the hierarchy from its own cgroup down.
TEST(CgroupJoinsTest, AMountOfPartOfTheHierarchyReachesOnlyWhatIsBelowIt) {
  const std::string mountinfo =
      "30 22 0:27 /docker/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(CgroupJoins("0::/docker/c1\n", "0::/docker/c1/daemon\n", mountinfo),
            (Joins{"/sys/fs/cgroup/daemon/cgroup.procs"}));
  EXPECT_EQ(CgroupJoins("0::/docker/c1\n", "0::/docker/c10\n", mountinfo), Joins{});
  EXPECT_EQ(CgroupJoins("0::/docker/c1/x\n", "0::/docker/c1\n", mountinfo),
            (Joins{"/sys/fs/cgroup/cgroup.procs"}));
}

TEST(CgroupJoinsTest, EscapedMountPointsAndMalformedLines) {
  const std::string mountinfo =
      "30 22 0:27 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(CgroupJoins("0::/a\n", "garbage\n0::/b\n::\n", mountinfo),
            (Joins{"/sys/fs/my cgroup/b/cgroup.procs"}));
}

}  // namespace
}  // namespace cudafs
