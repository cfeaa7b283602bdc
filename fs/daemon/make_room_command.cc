#include "fs/daemon/make_room_command.h"

#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "fs/daemon/control_plane.h"
#include "fs/daemon/mount_info.h"

namespace cudafs {

int MakeRoomCommand(const std::string& mountpoint, std::optional<uint64_t> bytes) {
  // Any other filesystem might keep the attribute as it is told; a
  // directory of a cudafs mount (also behind a bind mount) refuses it,
  // which would read as a refusal of the caller.
  const std::optional<MountInfoEntry> mount = MountAt(mountpoint);
  const char* not_root = nullptr;
  if (!mount || mount->fstype != "fuse.cudafs") {
    not_root = "not the root of a cudafs mount";
  } else if (!IsMountRoot(mountpoint)) {
    not_root = "not the root of a cudafs mount, but a directory in one";
  } else if (mount->root != "/") {
    not_root = "not the root of a cudafs mount, but a bind mount of a directory in one";
  }
  if (not_root != nullptr) {
    std::fprintf(stderr, "cudafs: %s: cannot make room: %s\n", mountpoint.c_str(), not_root);
    return 1;
  }
  const std::string value = bytes ? absl::StrCat(*bytes) : "all";
  if (setxattr(mountpoint.c_str(), kMakeRoomAttribute, value.data(), value.size(), 0) == 0) {
    return 0;
  }
  const int error = errno;
  std::string why;
  switch (error) {
    case EOPNOTSUPP:  // ENOTSUP on Linux; the mount is cudafs's (above)
      why = "this mount has no host memory to move data to (backend=host, or spill=0)";
      break;
    case ENOSPC:
      why = "no more data can move off a GPU (the daemon's log says how much is free)";
      break;
    case EPERM:
    case EACCES:
      why = bytes ? "only the user who mounted it, or root, can make room"
                  : "only the user who mounted it, or root, can make room for all; ask for "
                    "a size";
      break;
    case EBUSY:
      why =
          "users other than the one who mounted it may make room once every 10 s, one "
          "request at a time: try again later";
      break;
    default:
      why = std::strerror(error);
  }
  std::fprintf(stderr, "cudafs: %s: cannot make room: %s\n", mountpoint.c_str(), why.c_str());
  return 1;
}

}  // namespace cudafs
