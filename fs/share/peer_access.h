// Who may speak to the share service: FUSE's rule for the mount (the
// mounting user, anyone with allow_other, root with allow_root), applied
// to the peer's credentials as it connects, before it costs a thread. What
// a peer let in may map, it then proves with the descriptor it sends
// (descriptor_checks.h).
#ifndef CUDAFS_FS_SHARE_PEER_ACCESS_H_
#define CUDAFS_FS_SHARE_PEER_ACCESS_H_

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "fs/share/share_settings.h"

namespace cudafs {

// Whether user `uid` may use the mount.
bool ShareAllowed(uid_t uid, const ShareSettings& settings);

// The uid of the process that connected `socket` (SO_PEERCRED), when the
// mount lets it in; else EACCES, in words for that peer.
absl::StatusOr<uid_t> AuthorizePeer(int socket, const ShareSettings& settings);

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_PEER_ACCESS_H_
