// Taking a mount over. cudafs --upgrade MOUNTPOINT: this binary takes the
// mount over from the daemon serving it (hand_over.h), with the options
// that daemon was started with, and serves it in the background; the
// files, the open files and the requests waiting carry over. For a package
// upgrade, whose new binary would otherwise serve only mounts made after
// it. A keeper's successor (keeper.h) takes it over from the keeper of a
// daemon that died.
#ifndef CUDAFS_FS_DAEMON_UPGRADE_COMMAND_H_
#define CUDAFS_FS_DAEMON_UPGRADE_COMMAND_H_

#include <string>

namespace cudafs {

// The exit status: 0 once this binary serves the mount; 2 (kExitUsage),
// with a one-line message on stderr, when it does not (the old daemon
// then serves on): not a cudafs mount, a daemon of another user (root
// too upgrades only its own: the new daemon runs as the command does), a
// daemon that cannot hand over (what it says), or one that does not
// answer.
int UpgradeCommand(const std::string& mountpoint);

// A successor a keeper started, on connection `keeper` (kKeeperFdVariable),
// for the mount at `mountpoint` (kKeeperMountpointVariable): the daemon's
// exit status (Serve); it answers the keeper whether it serves.
int RecoverCommand(int keeper, const std::string& mountpoint);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_UPGRADE_COMMAND_H_
