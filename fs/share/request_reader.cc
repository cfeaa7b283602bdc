#include "fs/share/request_reader.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "alloc/base/errors.h"
#include "fs/share/descriptor_checks.h"
#include "fs/share/share_replies.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs {

RequestReader::Progress RequestReader::ReadFrom(int socket, dev_t mount_device) {
  char* into = reinterpret_cast<char*>(&request_);
  const size_t before_fds = fds_.size();
  bool truncated = false;
  const ssize_t got = ReceiveKeepingDescriptors(socket, into + got_, sizeof request_ - got_,
                                                MSG_DONTWAIT, &fds_, &truncated);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return Progress::kPartial;
  if (got <= 0) return Progress::kEnded;  // the end, or a broken peer
  const size_t before = got_;
  got_ += static_cast<size_t>(got);
  if (before < sizeof(uint32_t) && got_ >= sizeof(uint32_t)) {
    refusal_ = RefuseOtherProtocol(request_.magic);
  }
  if (!refusal_ && (truncated || fds_.size() > kShareBatch)) {
    refusal_ = ShareRefusal(ShareMagic(kShareVersion), EMFILE,
                            "the descriptors that came could not be taken: too many, or the "
                            "cudafs daemon is out of file descriptors");
  }
  for (size_t i = before_fds; i < fds_.size() && !refusal_; ++i) {
    if (absl::Status kind = CheckExpectedKind(fds_[i], mount_device); !kind.ok()) {
      refusal_ = ShareRefusal(ShareMagic(kShareVersion), ToErrno(kind), kind.message());
    }
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
