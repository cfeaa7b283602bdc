// What the daemon and its auto_unmount watcher ask of the mount table
// (read by fs/wire/mount_info_line.h): which mount is the daemon's own
// (found without asking the filesystem, which does not serve yet), and
// whether another mount covers it.
#ifndef CUDAFS_FS_DAEMON_MOUNT_INFO_H_
#define CUDAFS_FS_DAEMON_MOUNT_INFO_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "fs/wire/mount_info_line.h"

namespace cudafs {

// Everything `fd` (mountinfo, opened once: the watcher polls it) reads
// from its start.
std::string ReadFromStart(int fd);

// Whether another mount sits on `mount`'s root at the same path, hiding it
// (what mounting twice on one directory does): a path cannot reach a
// covered mount, and unmounting by path takes the one on top.
bool IsCovered(absl::Span<const MountInfoLine> mounts, const MountInfoLine& mount);

// The id of the mount that `fd` is on, from /proc/self/fdinfo.
std::optional<int> MountIdOf(int fd);

// Whether `path` is the root directory of the mount it is on (perhaps a
// bind mount of a directory, which `root` tells).
bool IsMountRoot(const std::string& path);

// The mount that `path` leads to now (the top one of a directory mounted
// on more than once), found through an O_PATH descriptor, which asks the
// filesystem nothing; nullopt when it cannot be found.
std::optional<MountInfoLine> MountAt(const std::string& path);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MOUNT_INFO_H_
