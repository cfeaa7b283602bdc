#include "fs/share/message_writer.h"

#include <sys/socket.h>

#include <cerrno>

#include "fs/wire/descriptor_socket.h"

namespace cudafs {

MessageWriter::Progress MessageWriter::WriteTo(int socket,
                                               const std::vector<ShareMessage>& messages) {
  while (message_ < messages.size()) {
    const ShareMessage& message = messages[message_];
    const bool first = sent_ == 0;
    const ssize_t sent = SendWithDescriptors(
        socket, message.bytes.data() + sent_, message.bytes.size() - sent_,
        first ? message.fds.data() : nullptr, first ? message.fds.size() : 0, MSG_DONTWAIT);
    if (sent < 0 && (errno == EAGAIN || errno == EINTR)) return Progress::kBlocked;
    if (sent <= 0) return Progress::kBroken;
    sent_ += static_cast<size_t>(sent);
    if (sent_ == message.bytes.size()) {
      ++message_;
      sent_ = 0;
    }
  }
  Restart();
  return Progress::kDone;
}

}  // namespace cudafs
