#include "fs/fuse/resent_requests.h"

#include <fcntl.h>

#include <cerrno>

#include "alloc/base/errors.h"
#include "fs/fuse/fuse_replies.h"

namespace cudafs::fuse_glue {
namespace {

// FUSE_UNIQUE_RESEND (Linux 6.9), which older headers lack.
constexpr uint64_t kResendBit = uint64_t{1} << 63;

thread_local uint64_t t_request_id = 0;

}  // namespace

void NoteRequestId(uint64_t unique) { t_request_id = unique; }

bool Resent() { return (t_request_id & kResendBit) != 0; }

uint64_t RequestId() { return t_request_id & ~kResendBit; }

absl::Status DoneBefore(const absl::Status& status, int error) {
  if (Resent() && error != 0 && ToErrno(status) == error) return absl::OkStatus();
  return status;
}

bool AppendsAtTheEnd(const fuse_file_info* fi) {
  return (fi->flags & O_APPEND) != 0 && !Resent();
}

absl::StatusOr<struct stat> MadeBefore(fuse_req_t req, const absl::StatusOr<struct stat>& made,
                                       fuse_ino_t parent, const char* name, mode_t type,
                                       fuse_ino_t ino) {
  if (!Resent() || ToErrno(made.status()) != EEXIST) return made;
  absl::StatusOr<struct stat> found = Fs(req).Lookup(parent, name);
  if (!found.ok()) return made;
  // The first time counted the reference (and a create its open handle)
  // that the answer now gives the kernel: the lookup's is one too many.
  Fs(req).Forget(found->st_ino, 1);
  if ((type != 0 && (found->st_mode & S_IFMT) != type) || (ino != 0 && found->st_ino != ino)) {
    return made;
  }
  return found;
}

}  // namespace cudafs::fuse_glue
