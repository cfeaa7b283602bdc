// Asking the daemon of a cudafs mount to make room on its GPUs
// (kShareMakeRoom over the share socket): cudafs_make_room, the CLI's
// --make-room and the allocation interposer all ask through here, and the
// daemon's answer carries the words the user sees.
#ifndef CUDAFS_FS_CLIENT_ROOM_REQUEST_H_
#define CUDAFS_FS_CLIENT_ROOM_REQUEST_H_

#include <cstdint>
#include <optional>

#include "fs/client/mount_table.h"

namespace cudafs::client {

struct RoomRequest {
  std::optional<uint64_t> bytes;  // to make free; nullopt: every byte that can move
  const char* gpu = nullptr;      // a PCI bus id; null: each GPU of the mount
  bool hold = false;
  // How long to wait for the daemon's answer; 0: RoomBoundSeconds(bytes).
  int bound_seconds = 0;
};

// The longest a make-room may take: 30 s, for a daemon busy with another
// one, plus 1 s per GiB asked (moves run at several GB/s, and at 2 GB/s
// where host memory must first be committed); 10 minutes for all.
int RoomBoundSeconds(std::optional<uint64_t> bytes);

// Asks the daemon of `mount` (from the mount table). 0 once the room is
// there; else a negative errno, and why (client_error.h).
int MakeRoomOn(const CudafsMount& mount, const RoomRequest& request);

// The cudafs mount whose root is at `path`: -EXDEV, saying so (without
// the path, which the caller shows), for anything else (another filesystem, a directory in a cudafs mount, a
// bind mount of one).
int MountAt(const char* path, CudafsMount* mount);

// MakeRoomOn the mount whose root is at `path` (MountAt).
int MakeRoomAt(const char* path, const RoomRequest& request);

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_ROOM_REQUEST_H_
