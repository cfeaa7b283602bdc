#include "fs/share/request_reader.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "fs/share/share_replies.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs {

RequestReader::Progress RequestReader::ReadFrom(int socket) {
  char* into = reinterpret_cast<char*>(&request_);
  bool refused = false;
  const ssize_t got = ReceiveWithDescriptors(socket, into + got_, sizeof request_ - got_,
                                             MSG_DONTWAIT, kShareBatch, &fds_, &refused);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return Progress::kPartial;
  if (got <= 0) return Progress::kEnded;  // the end, or a broken peer
  const size_t before = got_;
  got_ += static_cast<size_t>(got);
  if (before < sizeof(uint32_t) && got_ >= sizeof(uint32_t)) {
    refusal_ = RefuseOtherProtocol(request_.magic);
  }
  if (!refusal_ && refused) {
    refusal_ = ShareRefusal(ShareMagic(kShareVersion), EMFILE,
                            "the descriptors that came could not be taken: too many, or the "
                            "cudafs daemon is out of file descriptors");
  }
  if (refusal_) return Progress::kRefused;
  return got_ < sizeof request_ ? Progress::kPartial : Progress::kComplete;
}

std::vector<int> RequestReader::TakeDescriptors() { return std::exchange(fds_, {}); }

ShareMessage RequestReader::TakeRefusal() {
  ShareMessage refusal = *std::move(refusal_);
  refusal_.reset();
  return refusal;
}

void RequestReader::Reset() {
  request_ = {};
  got_ = 0;
  refusal_.reset();
}

}  // namespace cudafs
