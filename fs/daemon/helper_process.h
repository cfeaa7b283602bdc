// A process beside the daemon that outlives it: root's auto_unmount
// watcher (abandoned_mount_watcher.h) and a surviving mount's keeper
// (keeper.h). Either is this binary again, run as `NAME MOUNTPOINT` (so
// that ps, and `pkill -f "cudafs MOUNTPOINT"`, tell it from the daemon),
// with one end of a socket pair as its stdin and nothing else of the
// daemon's open: a copy of /dev/fuse would keep a dead mount's connection
// alive, the caller's pipes would keep the caller waiting, the daemon's
// directory would stay busy. It runs at / in a session of its own (a
// terminal's signals do not reach it), the stop signals blocked as the
// daemon blocked them.
#ifndef CUDAFS_FS_DAEMON_HELPER_PROCESS_H_
#define CUDAFS_FS_DAEMON_HELPER_PROCESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace cudafs {

// Starts helper `name` for `mountpoint` over a socket pair of `type`
// (SOCK_STREAM, SOCK_SEQPACKET) and waits until it says it runs
// (HelperRuns): until it has renamed itself it looks like a daemon of the
// mountpoint. Returns the daemon's end (close-on-exec). REQUIRES: /proc
// mounted (the helper runs /proc/self/exe).
absl::StatusOr<int> StartHelperProcess(const char* name, const std::string& mountpoint, int type);

// In the helper: names the process `name` and tells the daemon it runs.
void HelperRuns(const char* name);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_HELPER_PROCESS_H_
