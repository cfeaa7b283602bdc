// A successor's place in the cgroups: the old daemon's. `cudafs --upgrade`
// runs from anywhere (a shell, the package's postinst under apt, whose
// service systemd ends by killing every process left in its cgroup), but
// the new daemon must live where the old one did: in its mount unit or
// session, under its memory and CPU limits. So it moves itself into each
// of the old daemon's cgroups, v2 and v1 hierarchies alike, before it
// takes the mount.
#ifndef CUDAFS_FS_DAEMON_CGROUP_MEMBERSHIP_H_
#define CUDAFS_FS_DAEMON_CGROUP_MEMBERSHIP_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cudafs {

// The cgroup.procs files a process whose /proc/self/cgroup reads `ours`
// writes itself into to join the cgroups that `theirs` (another process's
// /proc/PID/cgroup) lists, given the mount table `mountinfo`: one per
// hierarchy where they differ and that is mounted here; none where they
// agree. A hierarchy that differs but is not mounted (or not reachable
// from its mount's root) is left out.
std::vector<std::string> CgroupJoins(absl::string_view ours, absl::string_view theirs,
                                     absl::string_view mountinfo);

// Moves this process (all its threads) into `pid`'s cgroups. An error
// names the cgroup this process could not join.
absl::Status JoinCgroupsOf(pid_t pid);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_CGROUP_MEMBERSHIP_H_
