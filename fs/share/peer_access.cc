#include "fs/share/peer_access.h"

#include <sys/socket.h>

#include <cerrno>

#include "alloc/base/errors.h"

namespace cudafs {

bool ShareAllowed(uid_t uid, const ShareSettings& settings) {
  return settings.allow_other || uid == settings.owner || (settings.allow_root && uid == 0);
}

absl::StatusOr<uid_t> AuthorizePeer(int socket, const ShareSettings& settings) {
  ucred peer = {};
  socklen_t length = sizeof peer;
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
      !ShareAllowed(peer.uid, settings)) {
    return PosixError(EACCES, "this mount lets only its owner in (allow_other lets others)");
  }
  return peer.uid;
}

}  // namespace cudafs
