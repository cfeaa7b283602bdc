// auto_unmount for a mount made as root, with no setuid helper.
//
// libfuse leaves a root mount's auto_unmount to `fusermount3
// --auto-unmount`, which needs a fusermount3 as new as libfuse (Debian 12's
// 3.14 lacks it): the package would have to ship a setuid helper of its
// own. Root needs none. A watcher process, forked from the daemon before
// it allocates anything (a later fork would copy every pinned buffer),
// holds no descriptor but the read end of a pipe whose write end only the
// daemon holds: when the daemon exits, however it dies, the read returns.
// The watcher then unmounts the mountpoint if it is a FUSE mount without
// its server: one whose open fails with ENOTCONN or ECONNABORTED (or
// ECANCELED, what a request queued over io_uring gets for ~0.1 s while the
// dead server's task is still exiting: fusermount3 takes that for a live
// server and leaves the mount). A mount
// unmounted cleanly, or another one made there since, opens and is left
// alone. Users other than root get auto_unmount from fusermount3 -o
// auto_unmount, which every fusermount3 of libfuse 3 honours.
#ifndef CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_
#define CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_

#include <string>

#include "absl/status/status.h"

namespace cudafs {

// Forks the watcher for `mountpoint` (an absolute path). REQUIRES: root,
// and no memory pinned or mapped for the device yet.
absl::Status WatchForAbandonedMount(const std::string& mountpoint);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_ABANDONED_MOUNT_WATCHER_H_
