// Serve: the daemon's life, once the plan is made (and, without -f, the
// command has forked: daemonize.h). In steps: make the process safe to
// mount from (stop signals blocked, open-file limit raised, root's
// auto_unmount watcher started); open the storage (device, arena); build
// the filesystem and its FUSE glue; start the session (mount); tune and
// share the mount, and tell the waiting parent; serve until unmounted,
// with the background tasks running; end the session.
#ifndef CUDAFS_FS_DAEMON_SERVE_H_
#define CUDAFS_FS_DAEMON_SERVE_H_

#include "fs/daemon/daemonize.h"
#include "fs/daemon/hand_over.h"
#include "fs/daemon/mount_plan.h"

namespace cudafs {

// Carries out `plan`; `ready` learns the exit status the command returns
// once the mount is usable or has failed. Returns the daemon's exit status:
// 0 once unmounted, 1 when serving failed, 2 (kExitUsage) when the mount
// could not be made (with a one-line message on stderr). With
// `predecessor`, takes over its mount (hand_over.h) instead of mounting,
// and answers it.
int Serve(const MountPlan& plan, ReadyPipe& ready, Predecessor* predecessor = nullptr);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_SERVE_H_
