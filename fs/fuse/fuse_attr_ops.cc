// Handlers of attributes, and of the filesystem's (statfs).
#include <sys/statvfs.h>

#include "fs/fuse/fuse_handlers.h"
#include "fs/fuse/fuse_replies.h"

namespace cudafs::fuse_glue {

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  absl::StatusOr<struct stat> st = Fs(req).GetAttributes(ino);
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_reply_attr(req, &*st, Context(req).settings.attr_timeout);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  AttributeChanges changes;
  if (to_set & FUSE_SET_ATTR_MODE) changes.mode = attr->st_mode;
  if (to_set & FUSE_SET_ATTR_UID) changes.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) changes.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) changes.size = attr->st_size;
  if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
    changes.atime = AttributeChanges::Time{(to_set & FUSE_SET_ATTR_ATIME_NOW) != 0, attr->st_atim};
  }
  if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
    changes.mtime = AttributeChanges::Time{(to_set & FUSE_SET_ATTR_MTIME_NOW) != 0, attr->st_mtim};
  }
  if (to_set & FUSE_SET_ATTR_CTIME) changes.ctime = attr->st_ctim;
  // Under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves removing set-id bits to
  // us and says when: FATTR_KILL_SUIDGID (the bit of FUSE_SET_ATTR_KILL_SUID)
  // with a truncate by a caller without CAP_FSETID (with a chown it is
  // always there, and the core's chown rule applies), and a setattr that
  // changes nothing, which is what chown(f, -1, -1) and the kernel's
  // file_remove_privs() (before a fallocate or copy_file_range by a caller
  // without CAP_FSETID) send.
  // Without KILLPRIV_V2 the kernel sends the mode itself (see
  // DataChangerOf), worked out again in fuse_setattr() by a narrower rule
  // than file_remove_privs(): suid, and sgid only with group execute. When
  // the kernel decided that a caller without CAP_FSETID outside the file's
  // group clears sgid without group execute, as tmpfs does, that leaves
  // nothing to send, and what arrives is the same empty setattr, for the
  // core to clear it. (A truncate carries the size, so there that case
  // keeps its sgid, as on any FUSE filesystem without KILLPRIV_V2.)
  constexpr int kAttributeBits = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                                 FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                                 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
  changes.remove_set_id = !(to_set & kAttributeBits);
  const bool kernel_kills = (to_set & FUSE_SET_ATTR_KILL_SUID) || changes.remove_set_id;
  absl::StatusOr<struct stat> st =
      Fs(req).SetAttributes(ino, changes, DataChangerOf(req, kernel_kills));
  if (!st.ok()) return ReplyError(req, st.status());
  fuse_reply_attr(req, &*st, Context(req).settings.attr_timeout);
}

void StatFs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st = Fs(req).StatFs();
  fuse_reply_statfs(req, &st);
}

}  // namespace cudafs::fuse_glue
