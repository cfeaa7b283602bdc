// The attribute operations of Filesystem: an inode's (getattr, setattr)
// and the filesystem's (statfs). See filesystem_state.h for the one-place
// rule.
#include <cerrno>

#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_scope.h"

namespace cudafs {

absl::StatusOr<struct stat> Filesystem::GetAttributes(InodeNumber ino) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  absl::ReaderMutexLock lock(&found->mu);
  struct stat st;
  FillStat(*found, &st);
  return st;
}

absl::StatusOr<struct stat> Filesystem::SetAttributes(InodeNumber ino,
                                                      const AttributeChanges& changes,
                                                      const Caller& caller) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  absl::MutexLock lock(&inode.mu);
  const timespec now = Now();
  // Who may change what the kernel has checked (setattr_prepare, with
  // capabilities); it has also dropped setgid from a chmod by a caller
  // outside the group. Check the rest first so that a refused change
  // changes nothing.
  if (changes.size) {
    if (inode.is_directory()) return PosixError(EISDIR);
    if (!inode.is_regular()) return PosixError(EINVAL);
    if (*changes.size > kMaxFileSize) return PosixError(EFBIG);
  }

  if (changes.size) {
    if (*changes.size < inode.size && inode.data()) {
      CUDAFS_RETURN_IF_ERROR(inode.data()->Truncate(*changes.size));
    }
    inode.size = *changes.size;
    // Like tmpfs: a truncate is a modification even when the size stays.
    inode.mtime = now;
    DropSetIdOnWrite(inode, caller);
  }
  if (changes.mode) inode.mode = inode.type | (*changes.mode & 07777);
  if (changes.remove_set_id) DropSetIdOnWrite(inode, caller);
  if (changes.uid || changes.gid) {
    if (changes.uid) inode.uid = *changes.uid;
    if (changes.gid) inode.gid = *changes.gid;
    inode.mode = ModeAfterChown(inode.mode);
  }
  if (changes.atime) inode.atime = changes.atime->now ? now : changes.atime->value;
  if (changes.mtime) inode.mtime = changes.mtime->now ? now : changes.mtime->value;
  inode.ctime = changes.ctime ? *changes.ctime : now;
  // A truncate changes the extents; the rest only the head.
  if (changes.size) {
    JournalScope::Inode(ino);
  } else {
    JournalScope::Attributes(ino);
  }
  struct stat st;
  FillStat(inode, &st);
  return st;
}

struct statvfs Filesystem::StatFs() {
  const ArenaStats stats = state_->arena->Stats();
  const uint64_t block = state_->arena->min_block();
  struct statvfs st = {};
  st.f_bsize = block;
  st.f_frsize = block;
  st.f_blocks = stats.blocks.capacity / block;
  st.f_bfree = stats.blocks.free / block;
  st.f_bavail = st.f_bfree;
  // Free inodes are free inode space in slots, so hard links and extended
  // attributes show in df -i as they do on tmpfs.
  st.f_files = state_->table.max_inodes();
  st.f_ffree = state_->table.free_slots();
  st.f_favail = st.f_ffree;
  st.f_namemax = kNameMax;
  return st;
}

}  // namespace cudafs
