// Mounts as /proc/self/mountinfo lists them, as far as the daemon and its
// auto_unmount watcher need them: which mount is the daemon's own (found
// without asking the filesystem, which does not serve yet), and whether
// another mount covers it.
#ifndef CUDAFS_FS_DAEMON_MOUNT_INFO_H_
#define CUDAFS_FS_DAEMON_MOUNT_INFO_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cudafs {

// One line of mountinfo: "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ... - TYPE ...".
struct MountInfoEntry {
  int id = 0;  // unique among the mounts that exist, reused once one is gone
  int parent = 0;
  std::string device;  // "MAJOR:MINOR" of the filesystem
  // The filesystem's directory the mount shows, unescaped: "/" for a
  // whole filesystem, the directory for a bind mount of one below it.
  std::string root;
  std::string mountpoint;  // the path, unescaped
  std::string fstype;      // "fuse.cudafs"
  friend bool operator==(const MountInfoEntry&, const MountInfoEntry&) = default;
};

// The mounts of `text`, in mountinfo's format; malformed lines are skipped.
std::vector<MountInfoEntry> ParseMountInfo(absl::string_view text);

// Everything `fd` (mountinfo, opened once: the watcher polls it) reads
// from its start.
std::string ReadFromStart(int fd);

// Whether another mount sits on `mount`'s root at the same path, hiding it
// (what mounting twice on one directory does): a path cannot reach a
// covered mount, and unmounting by path takes the one on top.
bool IsCovered(absl::Span<const MountInfoEntry> mounts, const MountInfoEntry& mount);

// The id of the mount that `fd` is on, from /proc/self/fdinfo.
std::optional<int> MountIdOf(int fd);

// Whether `path` is the root directory of the mount it is on (perhaps a
// bind mount of a directory, which `root` tells).
bool IsMountRoot(const std::string& path);

// The mount that `path` leads to now (the top one of a directory mounted
// on more than once), found through an O_PATH descriptor, which asks the
// filesystem nothing; nullopt when it cannot be found.
std::optional<MountInfoEntry> MountAt(const std::string& path);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MOUNT_INFO_H_
