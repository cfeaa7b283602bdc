// Requests the kernel sends again (FUSE_NOTIFY_RESEND) after a daemon died
// with them read and unanswered: the successor serves them anew, and one
// the dead daemon had carried out finds its own effect. An unlink then
// finds no name, a mkdir finds the directory it made. Their handlers answer
// as the first time would have: the name is gone, the directory is there.
// A request's effect and another process's are not told apart: one that
// removed or made the same name in the instant of the crash is taken for
// the request's own.
#ifndef CUDAFS_FS_FUSE_RESENT_REQUESTS_H_
#define CUDAFS_FS_FUSE_RESENT_REQUESTS_H_

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fs/fuse/libfuse.h"

namespace cudafs::fuse_glue {

// The session loop notes each request's id before serving it, on the thread
// that serves it.
void NoteRequestId(uint64_t unique);
// Whether the request this thread serves came again (bit 63 of its id).
bool Resent();
// Its id, as it was the first time (without bit 63).
uint64_t RequestId();

// A resent request that found `status`: OK where its own effect explains
// it (`error`: ENOENT for a removal or a rename, EEXIST for a setxattr that
// creates, ENODATA for a removexattr; 0 for none), else `status`.
absl::Status DoneBefore(const absl::Status& status, int error = ENOENT);
// Whether a write of an O_APPEND handle goes at the end of the file as the
// daemon finds it (true), or at the offset the kernel sent: a resent one
// may have been written already, and at its offset it is written again
// in place rather than appended twice.
bool AppendsAtTheEnd(const fuse_file_info* fi);
// A resent request that made `name` in `parent`, of `type` (S_IFMT bits; 0:
// any), and found it there (EEXIST): the entry it would have answered, if
// `name` is of that type (and, for a link, inode `ino`); else `made`.
absl::StatusOr<struct stat> MadeBefore(fuse_req_t req, const absl::StatusOr<struct stat>& made,
                                       fuse_ino_t parent, const char* name, mode_t type,
                                       fuse_ino_t ino = 0);

}  // namespace cudafs::fuse_glue

#endif  // CUDAFS_FS_FUSE_RESENT_REQUESTS_H_
