// The daemon's replies (ShareReply) in words: to a request that failed or
// succeeded with nothing more to say, and refusals before a request is
// served, framed for the client's own protocol version.
#ifndef CUDAFS_FS_SHARE_SHARE_REPLIES_H_
#define CUDAFS_FS_SHARE_SHARE_REPLIES_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fs/share/share_outcome.h"
#include "fs/wire/share_protocol.h"

namespace cudafs {

// A reply of protocol `magic` carrying `error` (0 or an errno) and `why`,
// the rest zero.
ShareReply MakeShareReply(uint32_t magic, int error, absl::string_view why);

// This protocol's reply to a request that failed with `status` (its errno
// and message; an EIO is logged), or succeeded with nothing more to say.
ShareReply ShareReplyTo(const absl::Status& status);

// The reply refusing with `error` and `why`, in the framing of the
// client's protocol `magic` (its layout up to the message is the same in
// every version).
ShareMessage ShareRefusal(uint32_t magic, int error, absl::string_view why);

// Refuses a request at once from its first four bytes when they announce
// another protocol than this daemon's (in words that client shows) or no
// cudafs protocol at all; nullopt when they announce this one.
std::optional<ShareMessage> RefuseOtherProtocol(uint32_t magic);

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_SHARE_REPLIES_H_
