#include "tests/mount/mount_table.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string_view>

#include "fs/wire/mount_info_line.h"
#include "tests/mount/mount.h"

namespace cudafs_test {

std::optional<MountEntry> FindMount(const std::string& mountpoint) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::optional<MountEntry> found;
  for (std::string text; std::getline(mountinfo, text);) {
    std::optional<cudafs::MountInfoLine> line = cudafs::ParseMountInfoLine(text);
    if (!line || line->mountpoint != mountpoint) continue;
    found = MountEntry{.mountpoint = line->mountpoint, .fstype = line->fstype,
                       .source = line->source, .options = line->options,
                       .super_options = line->super_options};
  }
  return found;
}

bool IsMounted(const std::string& mountpoint) { return FindMount(mountpoint).has_value(); }

std::optional<pid_t> FindDaemon(const std::string& mountpoint) {
  char binary[PATH_MAX];
  if (realpath(kBinary, binary) == nullptr) return std::nullopt;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return std::nullopt;
  std::optional<pid_t> found;
  while (const dirent* entry = readdir(proc)) {
    const pid_t pid = atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    const std::string dir = std::string("/proc/") + entry->d_name;
    char exe[PATH_MAX];
    const ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof exe - 1);
    if (n < 0) continue;
    // A binary rebuilt while the daemon runs reads "... (deleted)".
    if (!std::string_view(exe, n).starts_with(binary)) continue;
    std::ifstream comm_file(dir + "/comm");
    std::string comm;
    if (std::getline(comm_file, comm) && comm == "cudafs-unmount") continue;
    // Through a stream (not istreambuf_iterator, whose read error throws):
    // another test's daemon may exit between the open and the read (ESRCH).
    std::ifstream cmdline_file(dir + "/cmdline");
    std::stringstream cmdline;
    cmdline << cmdline_file.rdbuf();
    std::istringstream args(cmdline.str());
    std::string arg;
    while (std::getline(args, arg, '\0')) {
      if (arg == mountpoint) found = pid;
    }
  }
  closedir(proc);
  return found;
}

std::map<std::string, std::string> ParseStats(const std::string& text) {
  std::map<std::string, std::string> stats;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) stats[line.substr(0, space)] = line.substr(space + 1);
  }
  return stats;
}

std::map<std::string, std::string> MountStats(const std::string& root) {
  std::string text(4096, '\0');
  const ssize_t length = getxattr(root.c_str(), "user.cudafs.stats", text.data(), text.size());
  text.resize(length > 0 ? length : 0);
  return ParseStats(text);
}

}  // namespace cudafs_test
