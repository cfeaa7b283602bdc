// auto_unmount for a mount made as root, with no setuid helper.
//
// libfuse leaves a root mount's auto_unmount to `fusermount3
// --auto-unmount`, which needs a fusermount3 as new as libfuse (Debian 12's
// 3.14 lacks it): the package would have to ship a setuid helper of its
// own. Root needs none. Before mounting, the daemon starts a watcher
// (helper_process.h: `cudafs-unmount MOUNTPOINT`), holding nothing but the
// read end of a socket whose other end only the daemon holds. Once mounted, the
// daemon writes its mount's id and device numbers down the pipe; when the
// daemon exits, however it dies, the watcher's read returns.
//
// The watcher then detaches that mount, and no other, if it is still
// there and its server is gone: opening its root fails with ENOTCONN or
// ECONNABORTED (or ECANCELED, what a request queued over io_uring gets for
// ~0.1 s while the dead server's task is still exiting: fusermount3 takes
// that for a live server and leaves the mount). A mount unmounted cleanly,
// or another one made there since, is left alone. While another mount
// covers the dead one (a second mount on the same directory), no path
// reaches it and unmounting by path would take the live one on top: the
// watcher waits, on /proc/self/mountinfo, until the mount on top is gone,
// and then detaches its own. Users other than root get auto_unmount from
// fusermount3 -o auto_unmount, which every fusermount3 of libfuse 3
// honours.
#ifndef CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_
#define CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_

#include <string>

#include "absl/status/statusor.h"
#include "fs/daemon/mount_info.h"

namespace cudafs {

// The watcher's argv[0], which tells main to run it.
inline constexpr char kWatcherName[] = "cudafs-unmount";

class AbandonedMountWatcher {
 public:
  // Starts the watcher for `mountpoint` (an absolute path) and waits until
  // it runs. REQUIRES: root; /proc mounted (the watcher runs
  // /proc/self/exe).
  static absl::StatusOr<AbandonedMountWatcher> Start(const std::string& mountpoint);

  AbandonedMountWatcher(AbandonedMountWatcher&& other) noexcept;
  AbandonedMountWatcher& operator=(AbandonedMountWatcher&&) = delete;
  // Closing the pipe tells the watcher to look, as the daemon's exit does.
  ~AbandonedMountWatcher();

  // Names the mount to unmount once the daemon is gone: the daemon's own,
  // just made. Until then the watcher has nothing to unmount.
  void Watch(const MountInfoLine& mount);

 private:
  explicit AbandonedMountWatcher(int lifeline) : lifeline_(lifeline) {}

  int lifeline_;  // the pipe's write end
};

// The watcher's main, for `cudafs-unmount MOUNTPOINT` with the pipe's read
// end as stdin (MOUNTPOINT is for ps; the mount is known by its id).
int RunAbandonedMountWatcher();

// Detaches `mount`, which no other mount covers, if its server is gone
// (root only). False when its path does not lead to it (a symlink in its
// place, a mount over a directory above it): nothing is done then.
bool DetachIfAbandoned(const MountInfoLine& mount);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_
