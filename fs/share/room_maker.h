// RoomMaker: what the share service hands a make-room request to
// (kShareMakeRoom): the daemon's control plane, which decides who may ask
// for what and has the room keeper move the data. The service only reads
// the request and carries the answer back, off the FUSE request threads.
#ifndef CUDAFS_FS_SHARE_ROOM_MAKER_H_
#define CUDAFS_FS_SHARE_ROOM_MAKER_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace cudafs {

class RoomMaker {
 public:
  struct Request {
    std::optional<uint64_t> bytes;  // to make free; nullopt: every byte that can move
    std::string gpu;                // a PCI bus id, or empty: each GPU of the mount
    bool hold = false;              // then hold the room for a while
  };

  virtual ~RoomMaker() = default;

  // Returns once the room asked for by `caller` (a uid) is there; an
  // error with an errno and the words the user sees otherwise.
  virtual absl::Status MakeRoom(const Request& request, uid_t caller) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_ROOM_MAKER_H_
