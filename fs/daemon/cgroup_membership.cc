#include "fs/daemon/cgroup_membership.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fs/daemon/host_probes.h"
#include "fs/wire/mount_info_line.h"

namespace cudafs {
namespace {

// A /proc/PID/cgroup file: each hierarchy ("" for v2, else its
// controllers or name=, "cpu,cpuacct") -> the cgroup's path in it.
std::map<std::string, std::string> Cgroups(absl::string_view text) {
  std::map<std::string, std::string> cgroups;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() == 3 && absl::StartsWith(fields[2], "/")) {
      cgroups[std::string(fields[1])] = std::string(fields[2]);
    }
  }
  return cgroups;
}

// Whether `mount` holds hierarchy `hierarchy`: cgroup2 for v2, else a v1
// cgroup mount whose options name each of its controllers.
bool Holds(const MountInfoLine& mount, absl::string_view hierarchy) {
  if (hierarchy.empty()) return mount.fstype == "cgroup2";
  if (mount.fstype != "cgroup") return false;
  const std::set<absl::string_view> options = absl::StrSplit(mount.super_options, ',');
  for (absl::string_view controller : absl::StrSplit(hierarchy, ',')) {
    if (!options.contains(controller)) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> CgroupJoins(absl::string_view ours, absl::string_view theirs,
                                     absl::string_view mountinfo) {
  const std::map<std::string, std::string> mine = Cgroups(ours);
  const std::vector<MountInfoLine> mounts = ParseMountInfo(std::string_view(mountinfo.data(), mountinfo.size()));
  std::vector<std::string> joins;
  for (const auto& [hierarchy, path] : Cgroups(theirs)) {
    if (auto it = mine.find(hierarchy); it != mine.end() && it->second == path) continue;
    for (const MountInfoLine& mount : mounts) {
      if (!Holds(mount, hierarchy)) continue;
      // The mount shows the hierarchy from `root` down (a container's
      // view): a cgroup above it is out of reach.
      absl::string_view below = path;
      if (mount.root != "/" && !(absl::ConsumePrefix(&below, mount.root) &&
                                 (below.empty() || below.front() == '/'))) {
        continue;
      }
      joins.push_back(absl::StrCat(mount.mountpoint, mount.root == "/" ? path : below,
                                   "/cgroup.procs"));
      break;
    }
  }
  return joins;
}

absl::Status JoinCgroupsOf(pid_t pid) {
  const std::optional<std::string> theirs = ReadHostFile(absl::StrCat("/proc/", pid, "/cgroup"));
  if (!theirs) return absl::NotFoundError(absl::StrCat("process ", pid, " is gone"));
  const std::string own_pid = absl::StrCat(getpid());
  for (const std::string& procs : CgroupJoins(ReadHostFile("/proc/self/cgroup").value_or(""),
                                              *theirs,
                                              ReadHostFile("/proc/self/mountinfo").value_or(""))) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    const bool written =
        fd >= 0 && write(fd, own_pid.data(), own_pid.size()) == static_cast<ssize_t>(own_pid.size());
    const int error = errno;
    if (fd >= 0) close(fd);
    if (!written) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot join the running daemon's cgroup (", procs, ": ", std::strerror(error),
          "), where the new daemon must run"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cudafs
