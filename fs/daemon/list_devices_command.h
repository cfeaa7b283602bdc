// cudafs --list-devices: the GPUs cudafs can use, one line each (index,
// name, PCI bus id, total and free memory).
#ifndef CUDAFS_FS_DAEMON_LIST_DEVICES_COMMAND_H_
#define CUDAFS_FS_DAEMON_LIST_DEVICES_COMMAND_H_

namespace cudafs {

// The exit status: 0 once listed; 2 (kExitUsage), with a message on stderr,
// when the driver cannot be asked (no driver, no GPU: the message says).
int ListDevicesCommand();

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_LIST_DEVICES_COMMAND_H_
