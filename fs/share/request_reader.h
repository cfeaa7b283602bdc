// RequestReader: one request (ShareRequest) read from a non-blocking
// socket over as many calls as the peer takes to send it, with the
// descriptors that come with it. A peer of another protocol is refused
// from its first four bytes, and one sending more descriptors than a
// request carries (or more than the daemon can take), or of a kind no
// request takes, as soon as they come. It closes none: each one received
// is the caller's to dispose of (TakeDescriptors), refused or not.
#ifndef CUDAFS_FS_SHARE_REQUEST_READER_H_
#define CUDAFS_FS_SHARE_REQUEST_READER_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "fs/share/share_outcome.h"
#include "fs/wire/share_protocol.h"

namespace cudafs {

class RequestReader {
 public:
  enum class Progress {
    kPartial,   // more to come: call again when the socket is readable
    kComplete,  // request() is whole
    kRefused,   // TakeRefusal() says why, to the peer
    kEnded,     // the peer closed, or the socket failed
  };

  // Reads what the socket holds, without waiting; `mount_device` is the
  // mount's, whose files requests name.
  Progress ReadFrom(int socket, dev_t mount_device);

  const ShareRequest& request() const { return request_; }
  // The descriptors received so far, handed to the caller to dispose of.
  std::vector<int> TakeDescriptors();
  // After kRefused: the reply to send before closing.
  ShareMessage TakeRefusal();
  // Forgets the request read, for the connection's next one.
  void Reset();

 private:
  ShareRequest request_ = {};
  size_t got_ = 0;
  std::vector<int> fds_;
  std::optional<ShareMessage> refusal_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_REQUEST_READER_H_
