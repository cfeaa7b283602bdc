#include "fs/client/room_request.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "fs/client/client_error.h"
#include "fs/client/share_conversation.h"
#include "fs/wire/share_protocol.h"

namespace cudafs::client {

int RoomBoundSeconds(std::optional<uint64_t> bytes) {
  constexpr uint64_t kFloorSeconds = 30;
  if (!bytes) return 600;
  return static_cast<int>(std::min<uint64_t>(kFloorSeconds + (*bytes >> 30), INT_MAX));
}

int MakeRoomOn(const CudafsMount& mount, const RoomRequest& request) {
  ShareRequest ask = {};
  ask.op = kShareMakeRoom;
  ask.flags = (request.bytes ? 0u : uint32_t{kShareRoomAll}) |
              (request.hold ? uint32_t{kShareRoomHold} : 0u);
  ask.memory_bytes = request.bytes.value_or(0);
  if (request.gpu != nullptr) {
    if (std::strlen(request.gpu) >= sizeof ask.gpu) {
      return Fail(EINVAL, "%s is no PCI bus id", request.gpu);
    }
    std::strcpy(ask.gpu, request.gpu);
  }
  int connection = -1;
  if (int r = ConnectToMount(mount, &connection); r != 0) return r;
  const int bound =
      request.bound_seconds > 0 ? request.bound_seconds : RoomBoundSeconds(request.bytes);
  ShareReply reply;
  int result = BoundReplies(connection, bound);
  if (result == 0) result = Ask(connection, ask, {}, &reply);
  close(connection);
  return result;
}

int MountAt(const char* path, CudafsMount* mount) {
  struct stat at;
  if (stat(path, &at) != 0) return Fail(errno, "%s", std::strerror(errno));
  if (FindCudafsMount(at.st_dev, mount) != 0) {
    return Fail(EXDEV, "not the root of a cudafs mount");
  }
  struct stat root;
  if (stat(mount->mountpoint.c_str(), &root) == 0 && root.st_dev == at.st_dev &&
      root.st_ino == at.st_ino) {
    return 0;
  }
  // Another mount of the same filesystem shows a directory of it there.
  struct statx here = {}, there = {};
  const bool bound = statx(AT_FDCWD, path, 0, STATX_MNT_ID, &here) == 0 &&
                     statx(AT_FDCWD, mount->mountpoint.c_str(), 0, STATX_MNT_ID, &there) == 0 &&
                     (here.stx_mask & STATX_MNT_ID) && here.stx_mnt_id != there.stx_mnt_id;
  return Fail(EXDEV, "not the root of a cudafs mount, but %s in one",
              bound ? "a bind mount of a directory" : "a directory");
}

int MakeRoomAt(const char* path, const RoomRequest& request) {
  CudafsMount mount;
  if (int r = MountAt(path, &mount); r != 0) return r;
  return MakeRoomOn(mount, request);
}

}  // namespace cudafs::client
