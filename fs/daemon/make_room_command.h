// cudafs --make-room MOUNTPOINT SIZE|all: asks a mounted cudafs to move
// data off its GPUs until SIZE is free on each (all: every byte that can
// move), and returns when it is; for job launchers that start a program
// sizing itself from the GPU's free memory. It asks over the share socket
// (fs/client/room_request.h), as every program does; the owner's and
// root's room is held a while.
#ifndef CUDAFS_FS_DAEMON_MAKE_ROOM_COMMAND_H_
#define CUDAFS_FS_DAEMON_MAKE_ROOM_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

namespace cudafs {

// The exit status: 0 once the room is made; 1, with a message on stderr,
// when it cannot be (not a cudafs mount, no host memory to move data to,
// no more data that can move).
int MakeRoomCommand(const std::string& mountpoint, std::optional<uint64_t> bytes);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MAKE_ROOM_COMMAND_H_
