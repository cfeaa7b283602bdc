// An abstract Unix socket address (Linux): a NUL, then the name; no file
// on disk, gone with the last socket bound to it. Where users read one it
// is written "@NAME" (as ss(8) does). The share service and the hand-over
// of a mount both listen on one. Standalone (libc): the client library
// links it too.
#ifndef CUDAFS_FS_WIRE_ABSTRACT_ADDRESS_H_
#define CUDAFS_FS_WIRE_ABSTRACT_ADDRESS_H_

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace cudafs {

struct AbstractAddress {
  // The most bytes a name may have.
  static constexpr size_t kMaxName = sizeof(sockaddr_un::sun_path) - 1;

  // The address of `name`; nullopt for an empty name or one past kMaxName.
  static std::optional<AbstractAddress> Of(std::string_view name);

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&address); }

  sockaddr_un address;
  socklen_t length;  // what bind and connect take: the name's bytes, no more
};

}  // namespace cudafs

#endif  // CUDAFS_FS_WIRE_ABSTRACT_ADDRESS_H_
