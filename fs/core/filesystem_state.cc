#include "fs/core/filesystem_state.h"

#include <algorithm>
#include <cerrno>

#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/kernel_notifier.h"

namespace cudafs {
namespace {

constexpr int64_t kRelatimeInterval = 24 * 3600;  // seconds

bool Before(const timespec& a, const timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec);
}

}  // namespace

FilesystemState::FilesystemState(Arena* arena, const FilesystemConfig& config)
    : arena(arena),
      config(config),
      cache(&arena->device(), config.cache_bytes),
      file_space(&cache, arena, config.max_extent),
      symlink_space(arena, arena->min_block()),
      table(config.max_inodes, config.metadata_log),
      flusher(&cache, [this](uint64_t ino) { return FlushFile(ino); }) {
  std::shared_ptr<Inode> root = table.CreateRoot(S_IFDIR | (config.root_mode & 07777));
  absl::MutexLock namespace_lock(&namespace_mu);
  WritesNamespace();
  absl::MutexLock lock(&root->mu);
  root->mode = S_IFDIR | (config.root_mode & 07777);
  root->nlink = 2;
  root->uid = config.root_uid;
  root->gid = config.root_gid;
  root->atime = root->mtime = root->ctime = Now();
  root->mutable_directory().set_parent(kRootInode);
}

absl::StatusOr<std::shared_ptr<Inode>> FilesystemState::Get(InodeNumber ino) const {
  std::shared_ptr<Inode> inode = table.Get(ino);
  if (!inode) return PosixError(ENOENT, "stale inode");
  return inode;
}

absl::StatusOr<std::shared_ptr<Inode>> FilesystemState::GetDirectory(InodeNumber ino) const {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> dir, Get(ino));
  if (!dir->is_directory()) return PosixError(ENOTDIR);
  absl::ReaderMutexLock lock(&dir->mu);
  if (dir->nlink == 0) return PosixError(ENOENT, "directory was removed");
  return dir;
}

bool FilesystemState::TouchAtime(Inode& inode) {
  if (!config.update_atime) return false;
  const timespec now = Now();
  absl::MutexLock lock(&inode.mu);
  if (!NeedsAtimeUpdate(inode, now)) return false;
  inode.atime = now;
  return true;
}

bool FilesystemState::TrimGrowth(Inode& inode) {
  if (!inode.is_regular()) return false;
  bool trimmed = false;
  {
    absl::MutexLock lock(&inode.mu);
    if (CachedFile* data = inode.data()) {
      const uint64_t before = data->allocated_bytes();
      data->TrimTail(inode.size);
      trimmed = data->allocated_bytes() != before;
    }
  }
  // st_blocks changed with no request of the kernel's asking for it, and the
  // kernel keeps attributes for a day: a stat answered before would
  // otherwise keep showing the reserved blocks.
  if (trimmed) AttributesChanged(inode.ino);
  return trimmed;
}

void FilesystemState::NoteGrowth(InodeNumber ino) {
  if (!config.trim_growth_when_idle) return;
  absl::MutexLock lock(&growing_mu);
  growing[ino] = absl::Now();
}

void FilesystemState::AttributesChanged(InodeNumber ino) const {
  if (config.notifier != nullptr) config.notifier->AttributesChanged(ino);
}

absl::Status FilesystemState::FlushFile(InodeNumber ino) {
  std::shared_ptr<Inode> inode = table.Get(ino);
  if (!inode || !inode->is_regular()) return absl::OkStatus();
  absl::MutexLock lock(&inode->mu);
  return inode->data() ? inode->data()->Flush() : absl::OkStatus();
}

void FilesystemState::ReadsNamespace() const { namespace_mu.AssertReaderHeld(); }

void FilesystemState::WritesNamespace() const { namespace_mu.AssertHeld(); }

timespec Now() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return now;
}

void FillStat(const Inode& inode, struct stat* st) {
  *st = {};
  st->st_ino = inode.ino;
  st->st_mode = inode.mode;
  st->st_nlink = inode.nlink;
  st->st_uid = inode.uid;
  st->st_gid = inode.gid;
  st->st_rdev = inode.is_device() ? inode.rdev() : 0;
  st->st_size = static_cast<off_t>(inode.size);
  st->st_blksize = 4096;
  st->st_blocks = inode.is_regular() && inode.data()
                      ? static_cast<blkcnt_t>(inode.data()->allocated_bytes() / 512)
                      : 0;
  st->st_atim = inode.atime;
  st->st_mtim = inode.mtime;
  st->st_ctim = inode.ctime;
}

bool NeedsAtimeUpdate(const Inode& inode, const timespec& now) {
  // relatime, the Linux default: update when atime is not newer than
  // mtime/ctime, or is a day old.
  const timespec atime = inode.atime;
  return Before(atime, inode.mtime) || Before(atime, inode.ctime) ||
         now.tv_sec - atime.tv_sec >= kRelatimeInterval;
}

bool DropSetIdOnWrite(Inode& inode, const Caller& caller) {
  const mode_t before = inode.mode;
  inode.mode = ModeAfterDataChange(inode.mode, inode.gid, caller);
  return inode.mode != before;
}

void LockAll(const std::vector<Inode*>& inodes) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (Inode* inode : inodes) inode->mu.Lock();
}

void UnlockAll(const std::vector<Inode*>& inodes) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (Inode* inode : inodes) inode->mu.Unlock();
}

}  // namespace cudafs
