// cudafs --stats [--all|--json] MOUNTPOINT: the counters a mounted cudafs
// publishes on its root directory, with what statvfs says of it, printed
// as StatsReport lays them out.
#ifndef CUDAFS_FS_DAEMON_STATS_COMMAND_H_
#define CUDAFS_FS_DAEMON_STATS_COMMAND_H_

#include <string>

#include "fs/daemon/mount_options.h"

namespace cudafs {

// The exit status: 0 once printed; 2 (kExitUsage), with a message on stderr,
// when `mountpoint` is not the root of a cudafs mount or cannot be asked.
int StatsCommand(const std::string& mountpoint, MountOptions::StatsFormat format);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_STATS_COMMAND_H_
