#include "fs/share/share_replies.h"

#include <cerrno>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"

namespace cudafs {

ShareReply MakeShareReply(uint32_t magic, int error, absl::string_view why) {
  ShareReply reply = {};
  reply.magic = magic;
  reply.error = error;
  absl::SNPrintF(reply.message, sizeof reply.message, "%s", why);
  return reply;
}

ShareReply ShareReplyTo(const absl::Status& status) {
  const uint32_t magic = ShareMagic(kShareVersion);
  if (status.ok()) return MakeShareReply(magic, 0, "");
  const int error = ToErrno(status);
  if (error == EIO) LogError(status.ToString());
  return MakeShareReply(magic, error, status.message());
}

ShareMessage ShareRefusal(uint32_t magic, int error, absl::string_view why) {
  return MessageOf(MakeShareReply(magic, error, why));
}

std::optional<ShareMessage> RefuseOtherProtocol(uint32_t magic) {
  const uint32_t version = ShareVersionOf(magic);
  if (version == kShareVersion) return std::nullopt;
  if (version == 0)
    return ShareRefusal(ShareMagic(kShareVersion), EPROTO, "not a cudafs share request");
  return ShareRefusal(
      magic, EPROTONOSUPPORT,
      absl::StrFormat("this cudafs daemon speaks share protocol %d, the client %d: use the "
                      "client library of the cudafs that mounted",
                      kShareVersion, version));
}

}  // namespace cudafs
