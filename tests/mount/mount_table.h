// What the system says of cudafs mounts: the entry of a mountpoint in
// /proc/self/mountinfo, the daemon serving it, and its stats.
#ifndef CUDAFS_TESTS_MOUNT_MOUNT_TABLE_H_
#define CUDAFS_TESTS_MOUNT_MOUNT_TABLE_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

namespace cudafs_test {

struct MountEntry {
  std::string mountpoint;
  std::string fstype;
  std::string source;
  std::string options;        // per-mount options ("rw,nosuid,...")
  std::string super_options;  // the filesystem's ("rw,user_id=0,...,allow_other")
};

// The mount on `mountpoint` from /proc/self/mountinfo (the topmost one).
std::optional<MountEntry> FindMount(const std::string& mountpoint);
bool IsMounted(const std::string& mountpoint);

// The process running the cudafs binary under test with `mountpoint` on its
// command line (the daemon serving that mount), or nullopt. Root's
// auto_unmount watcher shares the command line; its name (comm) tells it
// apart.
std::optional<pid_t> FindDaemon(const std::string& mountpoint);

// The "name value" lines of cudafs's stats (cudafs --stats, or the root's
// user.cudafs.stats attribute) as a map.
std::map<std::string, std::string> ParseStats(const std::string& text);
// The stats of the cudafs mount at `root`, read from its attribute.
std::map<std::string, std::string> MountStats(const std::string& root);

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_MOUNT_MOUNT_TABLE_H_
