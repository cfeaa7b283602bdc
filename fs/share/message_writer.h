// MessageWriter: the messages of a ShareOutcome written to a non-blocking
// socket over as many calls as the peer takes to read them. A message's
// descriptors go with its first byte, so they arrive with its bytes.
#ifndef CUDAFS_FS_SHARE_MESSAGE_WRITER_H_
#define CUDAFS_FS_SHARE_MESSAGE_WRITER_H_

#include <cstddef>
#include <vector>

#include "fs/share/share_outcome.h"

namespace cudafs {

class MessageWriter {
 public:
  enum class Progress {
    kDone,     // every message sent; the next call starts from the first
    kBlocked,  // call again, with the same messages, when writable
    kBroken,   // the peer is gone, or the socket failed
  };

  // Sends what the socket takes of `messages`, from where the last call
  // stopped, without waiting.
  Progress WriteTo(int socket, const std::vector<ShareMessage>& messages);
  // Starts over with the first message (new messages to send).
  void Restart() { message_ = sent_ = 0; }

 private:
  size_t message_ = 0;  // the message being sent
  size_t sent_ = 0;     // its bytes sent
};

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_MESSAGE_WRITER_H_
