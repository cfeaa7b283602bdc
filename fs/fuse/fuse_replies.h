// What every FUSE handler uses: the session's context, who sent the
// request, and the replies that carry a Status or an entry. Private to the
// glue (fs/fuse).
#ifndef CUDAFS_FS_FUSE_FUSE_REPLIES_H_
#define CUDAFS_FS_FUSE_FUSE_REPLIES_H_

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fs/core/filesystem.h"
#include "fs/core/permissions.h"
#include "fs/fuse/fuse_context.h"
#include "fs/fuse/libfuse.h"

namespace cudafs::fuse_glue {

inline FuseContext& Context(fuse_req_t req) {
  return *static_cast<FuseContext*>(fuse_req_userdata(req));
}

inline Filesystem& Fs(fuse_req_t req) { return *Context(req).filesystem; }

// Who sent the request: its uid and gid, and its supplementary groups when
// a rule asks for them.
Caller CallerOf(fuse_req_t req);

// The caller of a request that changes a file's data, with the kernel's
// verdict on its set-id bits (`kernel_kills`: the request's
// FUSE_*_KILL_SUIDGID flag under FUSE_HANDLE_KILLPRIV_V2, or the empty
// setattr described at SetAttr).
//
// Without KILLPRIV_V2 (libfuse 3.14 cannot ask for it, nor can anyone of
// a kernel before 5.11) the kernel gives its verdict another way: before a
// write through the page cache, a truncate (O_TRUNC opens included: see
// Negotiate), a fallocate or a copy_file_range it decides with the caller's
// CAP_FSETID, and
// fuse_setattr() sends the mode without the bits in a SETATTR of its own
// (file_remove_privs(), do_truncate()). The request that changes the data
// must then apply no rule of its own: the uid rule of Caller would clear
// the bits for a user with CAP_FSETID and keep them for root without it.
// What the kernel leaves to us is a direct-I/O write
// (fuse_direct_write_iter() removes nothing), where the uid rule is the
// best guess there is: `uid_rule_without_kernel`.
Caller DataChangerOf(fuse_req_t req, bool kernel_kills, bool uid_rule_without_kernel = false);

// Replies with the status's errno.
void ReplyError(fuse_req_t req, const absl::Status& status);
// Replies 0, or the error.
void ReplyStatus(fuse_req_t req, const absl::Status& status);

// The entry of an inode: its attributes, the mount's generation and the
// cache lifetimes.
fuse_entry_param EntryOf(fuse_req_t req, const struct stat& st);
// Replies with the entry, or the error.
void ReplyEntry(fuse_req_t req, const absl::StatusOr<struct stat>& st);

}  // namespace cudafs::fuse_glue

#endif  // CUDAFS_FS_FUSE_FUSE_REPLIES_H_
