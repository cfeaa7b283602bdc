#include "fs/daemon/make_room_command.h"

#include <unistd.h>

#include <cstdio>

#include "fs/client/client_error.h"
#include "fs/client/room_request.h"

namespace cudafs {

int MakeRoomCommand(const std::string& mountpoint, std::optional<uint64_t> bytes) {
  // What the client library does for every program: the daemon's answer
  // has the words.
  client::CudafsMount mount;
  client::RoomRequest request;
  request.bytes = bytes;
  int result = client::MountAt(mountpoint.c_str(), &mount);
  if (result == 0) {
    // The owner's and root's room is held for the program they start next.
    request.hold = getuid() == 0 || getuid() == mount.owner;
    result = client::MakeRoomOn(mount, request);
  }
  if (result == 0) return 0;
  std::fprintf(stderr, "cudafs: %s: cannot make room: %s\n", mountpoint.c_str(),
               client::LastError());
  return 1;
}

}  // namespace cudafs
