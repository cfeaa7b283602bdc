// Locking overview. There is no filesystem-wide lock on the data path.
//
//  1. Impl::namespace_mu_ guards every Directory and Inode::parent: lookups
//     and readdir share it, operations that change names (create, link,
//     unlink, rename, ...) hold it exclusively. Read, write, setattr and
//     xattr operations never take it.
//  2. Inode::mu guards one inode's attributes, xattrs and data. Data reads
//     share it, so readers of one file run in parallel; writers of one file
//     serialise (as the kernel serialises them for one file anyway). Only
//     namespace operations, which hold (1) exclusively, lock several inodes.
//  3. InodeTable's lock guards the inode map and lookup/open counts.
//  4. The PageCache's lock guards cached pages of every file (see
//     cache/page_cache.h); it is held for memory copies only.
//  5. Arena's lock guards the buddy allocator and the granules' use counts;
//     committing a granule and device copies run outside every lock but the
//     inode's.
// Locks are taken in this order only. The flusher thread takes one inode's
// lock at a time, holding none.
#include "fs/core/filesystem.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "alloc/base/errors.h"
#include "cache/write_back_flusher.h"
#include "fs/core/inode_table.h"

namespace cudafs {

bool Caller::InGroup(gid_t gid) const {
  if (gid == gid_) return true;
  if (!fetch_groups_) return false;
  if (!groups_) groups_ = fetch_groups_();
  return std::find(groups_->begin(), groups_->end(), gid) != groups_->end();
}

namespace {

constexpr size_t kNameMax = 255;
constexpr size_t kSymlinkMax = 4095;  // PATH_MAX - 1
constexpr size_t kXattrNameMax = 255;
constexpr size_t kXattrValueMax = 65536;
constexpr uint64_t kMaxFileSize = std::numeric_limits<int64_t>::max();
constexpr int64_t kRelatimeInterval = 24 * 3600;  // seconds

// Lock and unlock a set of inodes sorted by number, for rename. A set that
// varies at run time is beyond the static lock analysis.
void LockAll(const std::vector<Inode*>& inodes) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (Inode* inode : inodes) inode->mu.Lock();
}
void UnlockAll(const std::vector<Inode*>& inodes) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (Inode* inode : inodes) inode->mu.Unlock();
}

timespec Now() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return now;
}

bool Before(const timespec& a, const timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec);
}

absl::Status ValidateName(absl::string_view name) {
  if (name.empty()) return PosixError(ENOENT);
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  if (name.find('/') != absl::string_view::npos) return PosixError(EINVAL);
  return absl::OkStatus();
}

bool IsDotOrDotDot(absl::string_view name) { return name == "." || name == ".."; }

void FillStat(const Inode& inode, struct stat* st) ABSL_SHARED_LOCKS_REQUIRED(inode.mu) {
  *st = {};
  st->st_ino = inode.ino;
  st->st_mode = inode.mode;
  st->st_nlink = inode.nlink;
  st->st_uid = inode.uid;
  st->st_gid = inode.gid;
  st->st_rdev = inode.rdev;
  st->st_size = static_cast<off_t>(inode.size);
  st->st_blksize = 4096;
  st->st_blocks = inode.data ? static_cast<blkcnt_t>(inode.data->allocated_bytes() / 512) : 0;
  st->st_atim = inode.atime;
  st->st_mtim = inode.mtime;
  st->st_ctim = inode.ctime;
}

// What a change of the data by `caller` does to set-id bits, for a caller
// that the kernel says lacks CAP_FSETID: suid goes; sgid goes when the
// group may execute, and otherwise when the caller is not in the file's
// group (the kernel's setattr_should_drop_sgid). True when the mode
// changed.
bool DropSetIdOnWrite(Inode& inode, const Caller& caller) ABSL_EXCLUSIVE_LOCKS_REQUIRED(inode.mu) {
  if (!caller.drops_set_id() || !inode.is_regular()) return false;
  const mode_t before = inode.mode;
  inode.mode &= ~S_ISUID;
  if ((inode.mode & S_ISGID) && ((inode.mode & S_IXGRP) || !caller.InGroup(inode.gid))) {
    inode.mode &= ~S_ISGID;
  }
  return inode.mode != before;
}

// Locks a directory and an entry of it (two distinct inodes) in
// inode-number order, the order Rename takes its inodes in. The namespace
// lock already rules out deadlock; one order throughout keeps absl's
// deadlock detector, which sees only lock order, from aborting the process.
class ABSL_SCOPED_LOCKABLE InodePairLock {
 public:
  InodePairLock(Inode& dir, Inode& entry) ABSL_EXCLUSIVE_LOCK_FUNCTION(dir.mu, entry.mu)
      : first_(dir.ino < entry.ino ? dir : entry), second_(dir.ino < entry.ino ? entry : dir) {
    first_.mu.Lock();
    second_.mu.Lock();
  }
  ~InodePairLock() ABSL_UNLOCK_FUNCTION() {
    second_.mu.Unlock();
    first_.mu.Unlock();
  }

 private:
  Inode& first_;
  Inode& second_;
};

bool NeedsAtimeUpdate(const Inode& inode, const timespec& now)
    ABSL_SHARED_LOCKS_REQUIRED(inode.mu) {
  // relatime, the Linux default: update when atime is not newer than
  // mtime/ctime, or is a day old.
  return Before(inode.atime, inode.mtime) || Before(inode.atime, inode.ctime) ||
         now.tv_sec - inode.atime.tv_sec >= kRelatimeInterval;
}

}  // namespace

class Filesystem::Impl {
 public:
  Impl(Arena* arena, const FilesystemConfig& config)
      : arena_(arena),
        config_(config),
        cache_(&arena->device(), config.cache_bytes),
        table_(config.max_inodes) {
    root_ = table_.CreateRoot(S_IFDIR | (config.root_mode & 07777));
    absl::MutexLock lock(&root_->mu);
    root_->mode = S_IFDIR | (config.root_mode & 07777);
    root_->nlink = 2;
    root_->uid = config.root_uid;
    root_->gid = config.root_gid;
    root_->atime = root_->mtime = root_->ctime = Now();
    root_->directory = std::make_unique<Directory>();
    root_->parent = kRootInode;
  }

  // Flushes the dirty pages of `ino` (fsync); a file that is gone has none.
  absl::Status FlushFile(InodeNumber ino) {
    std::shared_ptr<Inode> inode = table_.Get(ino);
    if (!inode || !inode->is_regular()) return absl::OkStatus();
    absl::MutexLock lock(&inode->mu);
    return inode->data->Flush();
  }

  PageCacheStats CacheStats() const { return cache_.Stats(); }

  absl::StatusOr<std::shared_ptr<Inode>> Get(InodeNumber ino) const {
    std::shared_ptr<Inode> inode = table_.Get(ino);
    if (!inode) return PosixError(ENOENT, "stale inode");
    return inode;
  }

  // The directory `ino`, still linked into the tree.
  absl::StatusOr<std::shared_ptr<Inode>> GetDirectory(InodeNumber ino) const {
    absl::StatusOr<std::shared_ptr<Inode>> dir = Get(ino);
    if (!dir.ok()) return dir.status();
    if (!(*dir)->is_directory()) return PosixError(ENOTDIR);
    absl::ReaderMutexLock lock(&(*dir)->mu);
    if ((*dir)->nlink == 0) return PosixError(ENOENT, "directory was removed");
    return dir;
  }

  // Creates an inode named `name` in `parent` and returns its attributes
  // with one lookup reference. `setup` fills type-specific state before the
  // inode becomes visible.
  absl::StatusOr<struct stat> CreateNamed(InodeNumber parent, absl::string_view name,
                                          mode_t mode, dev_t rdev, const Caller& caller,
                                          const std::function<void(Inode&)>& setup,
                                          bool open) {
    if (absl::Status status = ValidateName(name); !status.ok()) return status;
    absl::MutexLock namespace_lock(&namespace_mu_);
    absl::StatusOr<std::shared_ptr<Inode>> dir = GetDirectory(parent);
    if (!dir.ok()) return dir.status();
    if (IsDotOrDotDot(name) || (*dir)->directory->Find(name)) return PosixError(EEXIST);
    absl::StatusOr<std::shared_ptr<Inode>> created = table_.Create(mode);
    if (!created.ok()) return created.status();
    Inode& inode = **created;
    const timespec now = Now();
    struct stat st;
    {
      absl::MutexLock dir_lock(&(*dir)->mu);
      absl::MutexLock lock(&inode.mu);
      inode.mode = mode;
      inode.uid = caller.uid();
      inode.rdev = rdev;
      inode.atime = inode.mtime = inode.ctime = now;
      // setgid directories hand their group down, and their setgid bit to
      // subdirectories. (Whether a new file may keep its own setgid bit the
      // kernel has decided already: mode_strip_sgid, with CAP_FSETID.)
      if ((*dir)->mode & S_ISGID) {
        inode.gid = (*dir)->gid;
        if (inode.is_directory()) inode.mode |= S_ISGID;
      } else {
        inode.gid = caller.gid();
      }
      if (inode.is_directory()) {
        inode.nlink = 2;
        inode.directory = std::make_unique<Directory>();
        inode.parent = parent;
        ++(*dir)->nlink;
      } else {
        inode.nlink = 1;
      }
      if (inode.is_regular()) {
        inode.data = std::make_unique<CachedFile>(&cache_, inode.ino, arena_, config_.max_extent);
      }
      setup(inode);
      (*dir)->mtime = (*dir)->ctime = now;
      FillStat(inode, &st);
    }
    (*dir)->directory->Insert(name, Directory::Entry{inode.ino, inode.type});
    table_.AddLookup(inode);
    if (open) table_.AddOpen(inode);
    return st;
  }

  // Removes `name` from `parent` (unlink or rmdir).
  absl::Status RemoveNamed(InodeNumber parent, absl::string_view name, bool directory) {
    if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
    if (directory && name == ".") return PosixError(EINVAL);
    if (directory && name == "..") return PosixError(ENOTEMPTY);
    std::shared_ptr<Inode> victim;
    {
      absl::MutexLock namespace_lock(&namespace_mu_);
      absl::StatusOr<std::shared_ptr<Inode>> dir = GetDirectory(parent);
      if (!dir.ok()) return dir.status();
      std::optional<Directory::Entry> entry = (*dir)->directory->Find(name);
      if (!entry) return PosixError(ENOENT);
      if (directory && entry->type != S_IFDIR) return PosixError(ENOTDIR);
      if (!directory && entry->type == S_IFDIR) return PosixError(EISDIR);
      absl::StatusOr<std::shared_ptr<Inode>> found = Get(entry->ino);
      if (!found.ok()) return found.status();
      victim = *found;
      if (directory && !victim->directory->empty()) return PosixError(ENOTEMPTY);
      const timespec now = Now();
      InodePairLock lock(**dir, *victim);
      (*dir)->directory->Erase(name);
      Unname(**dir, *victim, now);
      (*dir)->mtime = (*dir)->ctime = now;
    }
    table_.DropIfUnused(victim);
    return absl::OkStatus();
  }

  // Bookkeeping for an inode losing one name in `dir`. A name that was not
  // the last gives back the inode slot Link took for it; the last one's
  // slot goes with the inode.
  void Unname(Inode& dir, Inode& victim, const timespec& now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dir.mu, victim.mu) {
    if (victim.is_directory()) {
      victim.nlink = 0;
      --dir.nlink;
    } else {
      if (victim.nlink > 1) table_.ReleaseSpace(InodeTable::kSlotBytes);
      --victim.nlink;
    }
    victim.ctime = now;
  }

  // True when `ancestor` is `ino` or one of its parents.
  bool IsAncestor(InodeNumber ancestor, InodeNumber ino) const
      ABSL_SHARED_LOCKS_REQUIRED(namespace_mu_) {
    for (InodeNumber current = ino;;) {
      if (current == ancestor) return true;
      if (current == kRootInode) return false;
      std::shared_ptr<Inode> inode = table_.Get(current);
      if (!inode) return false;
      current = inode->parent;
    }
  }

  absl::Status Rename(InodeNumber parent, absl::string_view name, InodeNumber new_parent,
                      absl::string_view new_name, unsigned flags) {
    if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
        ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))) {
      return PosixError(EINVAL);
    }
    const bool exchange = flags & RENAME_EXCHANGE;
    if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
    if (absl::Status status = ValidateName(new_name); !status.ok()) return status;
    if (IsDotOrDotDot(name) || IsDotOrDotDot(new_name)) return PosixError(EBUSY);
    std::shared_ptr<Inode> victim;
    {
      absl::MutexLock namespace_lock(&namespace_mu_);
      absl::StatusOr<std::shared_ptr<Inode>> from_dir = GetDirectory(parent);
      if (!from_dir.ok()) return from_dir.status();
      absl::StatusOr<std::shared_ptr<Inode>> to_dir =
          GetDirectory(new_parent);
      if (!to_dir.ok()) return to_dir.status();
      std::optional<Directory::Entry> source = (*from_dir)->directory->Find(name);
      if (!source) return PosixError(ENOENT);
      std::optional<Directory::Entry> target = (*to_dir)->directory->Find(new_name);
      if ((flags & RENAME_NOREPLACE) && target) return PosixError(EEXIST);
      if (exchange && !target) return PosixError(ENOENT);
      if (target && target->ino == source->ino) return absl::OkStatus();  // same file

      absl::StatusOr<std::shared_ptr<Inode>> moved = Get(source->ino);
      if (!moved.ok()) return moved.status();
      std::shared_ptr<Inode> replaced;
      if (target) {
        absl::StatusOr<std::shared_ptr<Inode>> found = Get(target->ino);
        if (!found.ok()) return found.status();
        replaced = *found;
      }
      const bool moved_is_dir = (*moved)->is_directory();
      const bool replaced_is_dir = replaced && replaced->is_directory();
      const bool cross = parent != new_parent;
      // A directory may not move below itself; for an exchange, neither.
      if (moved_is_dir && cross && IsAncestor(source->ino, new_parent)) return PosixError(EINVAL);
      if (exchange && replaced_is_dir && cross && IsAncestor(target->ino, parent)) {
        return PosixError(EINVAL);
      }
      if (!exchange && replaced) {
        if (moved_is_dir && !replaced_is_dir) return PosixError(ENOTDIR);
        if (!moved_is_dir && replaced_is_dir) return PosixError(EISDIR);
        if (replaced_is_dir && !replaced->directory->empty()) return PosixError(ENOTEMPTY);
      }

      // Lock every inode involved, in inode-number order; safe because the
      // namespace lock is held exclusively, so no other thread holds two.
      std::vector<Inode*> involved = {from_dir->get(), to_dir->get(), moved->get()};
      if (replaced) involved.push_back(replaced.get());
      std::sort(involved.begin(), involved.end(),
                [](Inode* a, Inode* b) { return a->ino < b->ino; });
      involved.erase(std::unique(involved.begin(), involved.end()), involved.end());
      LockAll(involved);
      RenameLocked(**from_dir, name, **to_dir, new_name, **moved, replaced.get(), exchange);
      UnlockAll(involved);
      if (!exchange) victim = replaced;
    }
    if (victim) table_.DropIfUnused(victim);
    return absl::OkStatus();
  }

  void RenameLocked(Inode& from_dir, absl::string_view name, Inode& to_dir,
                    absl::string_view new_name, Inode& moved, Inode* replaced, bool exchange)
      ABSL_NO_THREAD_SAFETY_ANALYSIS /* locks taken in a sorted loop */ {
    const bool cross = &from_dir != &to_dir;
    const timespec now = Now();
    const Directory::Entry moved_entry{moved.ino, moved.type};
    if (exchange) {
      const Directory::Entry replaced_entry{replaced->ino, replaced->type};
      from_dir.directory->Replace(name, replaced_entry);
      to_dir.directory->Replace(new_name, moved_entry);
      if (cross) {
        if (moved.is_directory()) {
          moved.parent = to_dir.ino;
          --from_dir.nlink;
          ++to_dir.nlink;
        }
        if (replaced->is_directory()) {
          replaced->parent = from_dir.ino;
          --to_dir.nlink;
          ++from_dir.nlink;
        }
      }
      replaced->ctime = now;
    } else {
      if (replaced) {
        to_dir.directory->Replace(new_name, moved_entry);
        Unname(to_dir, *replaced, now);
      } else {
        to_dir.directory->Insert(new_name, moved_entry);
      }
      from_dir.directory->Erase(name);
      if (moved.is_directory() && cross) {
        moved.parent = to_dir.ino;
        --from_dir.nlink;
        ++to_dir.nlink;
      }
    }
    moved.ctime = now;
    from_dir.mtime = from_dir.ctime = now;
    to_dir.mtime = to_dir.ctime = now;
  }

  absl::StatusOr<struct stat> SetAttributes(InodeNumber ino, const AttributeChanges& changes,
                                            const Caller& caller) {
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
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
      if (*changes.size < inode.size) {
        if (absl::Status status = inode.data->Truncate(*changes.size); !status.ok()) return status;
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
      // chown drops set-id bits of non-directories, even for root.
      if (!inode.is_directory()) {
        inode.mode &= ~S_ISUID;
        if (inode.mode & S_IXGRP) inode.mode &= ~S_ISGID;
      }
    }
    if (changes.atime) inode.atime = changes.atime->now ? now : changes.atime->value;
    if (changes.mtime) inode.mtime = changes.mtime->now ? now : changes.mtime->value;
    inode.ctime = changes.ctime ? *changes.ctime : now;
    struct stat st;
    FillStat(inode, &st);
    return st;
  }

  // Sets the atime to now where relatime (or strictatime) says a read
  // should, unless the mount is noatime. True when it moved.
  bool TouchAtime(Inode& inode) {
    if (!config_.update_atime) return false;
    const timespec now = Now();
    absl::MutexLock lock(&inode.mu);
    if (!NeedsAtimeUpdate(inode, now)) return false;
    inode.atime = now;
    return true;
  }

  absl::StatusOr<size_t> Read(InodeNumber ino, uint64_t offset, size_t size, char* out,
                              bool update_atime) {
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    size_t length = 0;
    bool touch_atime = false;
    const timespec now = Now();
    {
      absl::ReaderMutexLock lock(&inode.mu);
      if (inode.is_directory()) return PosixError(EISDIR);
      if (!inode.is_regular()) return PosixError(EINVAL);
      if (offset < inode.size) length = std::min<uint64_t>(size, inode.size - offset);
      if (length > 0) {
        if (absl::Status status = inode.data->Read(offset, length, out, inode.size);
            !status.ok()) {
          return status;
        }
      }
      touch_atime = update_atime && config_.update_atime && NeedsAtimeUpdate(inode, now);
    }
    if (touch_atime) {
      absl::MutexLock lock(&inode.mu);
      inode.atime = now;
    }
    return length;
  }

  absl::StatusOr<size_t> Write(InodeNumber ino, uint64_t offset, const char* data, size_t size,
                               bool append, const Caller& caller) {
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    bool set_id_dropped;
    {
      absl::MutexLock lock(&inode.mu);
      if (inode.is_directory()) return PosixError(EISDIR);
      if (!inode.is_regular()) return PosixError(EINVAL);
      if (append) offset = inode.size;
      if (offset > kMaxFileSize || size > kMaxFileSize - offset) return PosixError(EFBIG);
      if (size == 0) return 0;
      if (absl::Status status = inode.data->Write(offset, data, size, inode.size); !status.ok()) {
        return status;
      }
      inode.size = std::max<uint64_t>(inode.size, offset + size);
      inode.mtime = inode.ctime = Now();
      set_id_dropped = DropSetIdOnWrite(inode, caller);
    }
    if (set_id_dropped) AttributesChanged(ino);
    return size;
  }

  // Tells whoever caches attributes that those of `ino` changed (see
  // FilesystemConfig::attributes_changed). Call with no lock held.
  void AttributesChanged(InodeNumber ino) {
    if (config_.attributes_changed) config_.attributes_changed(ino);
  }

  // Copies on the device, extent to extent: no byte goes through the host.
  absl::StatusOr<size_t> CopyFileRange(InodeNumber in, uint64_t in_offset, InodeNumber out,
                                       uint64_t out_offset, size_t length, const Caller& caller) {
    absl::StatusOr<std::shared_ptr<Inode>> source = Get(in);
    if (!source.ok()) return source.status();
    absl::StatusOr<std::shared_ptr<Inode>> target = Get(out);
    if (!target.ok()) return target.status();
    Inode& from = **source;
    Inode& to = **target;
    if (from.is_directory() || to.is_directory()) return PosixError(EISDIR);
    if (!from.is_regular() || !to.is_regular()) return PosixError(EINVAL);
    if (&from == &to && in_offset < out_offset + length && out_offset < in_offset + length) {
      return PosixError(EINVAL);
    }
    // Two inodes lock in number order, like rename; one locks once.
    std::vector<Inode*> involved = {&from, &to};
    if (&from == &to) involved.pop_back();
    std::sort(involved.begin(), involved.end(),
              [](Inode* a, Inode* b) { return a->ino < b->ino; });
    LockAll(involved);
    bool set_id_dropped = false;
    bool source_accessed = false;
    absl::StatusOr<size_t> copied = CopyLocked(from, in_offset, to, out_offset, length, caller,
                                               &set_id_dropped, &source_accessed);
    UnlockAll(involved);
    if (set_id_dropped) AttributesChanged(out);
    // The kernel refreshes the target's attributes after a copy, not the
    // source's, whose atime the copy may have moved.
    if (source_accessed && in != out) AttributesChanged(in);
    return copied;
  }

  absl::StatusOr<size_t> CopyLocked(Inode& from, uint64_t in_offset, Inode& to,
                                    uint64_t out_offset, size_t length, const Caller& caller,
                                    bool* set_id_dropped, bool* source_accessed)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {  // both locked by the caller
    if (in_offset >= from.size) return 0;
    const uint64_t count = std::min<uint64_t>(length, from.size - in_offset);
    if (out_offset > kMaxFileSize || count > kMaxFileSize - out_offset) return PosixError(EFBIG);
    if (absl::Status status = to.data->CopyFrom(*from.data, in_offset, out_offset, count);
        !status.ok()) {
      return status;
    }
    to.size = std::max<uint64_t>(to.size, out_offset + count);
    to.mtime = to.ctime = Now();
    *set_id_dropped = DropSetIdOnWrite(to, caller);
    if (config_.update_atime && NeedsAtimeUpdate(from, to.mtime)) {
      from.atime = to.mtime;
      *source_accessed = true;
    }
    return count;
  }

  absl::Status Allocate(InodeNumber ino, int mode, uint64_t offset, uint64_t length,
                        const Caller& caller) {
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    if (length == 0) return PosixError(EINVAL);
    if (offset > kMaxFileSize || length > kMaxFileSize - offset) return PosixError(EFBIG);
    const bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
    const int operation = mode & ~FALLOC_FL_KEEP_SIZE;
    if (operation != 0 && operation != FALLOC_FL_PUNCH_HOLE && operation != FALLOC_FL_ZERO_RANGE) {
      return PosixError(EOPNOTSUPP);
    }
    if (operation == FALLOC_FL_PUNCH_HOLE && !keep_size) return PosixError(EOPNOTSUPP);
    bool set_id_dropped;
    {
      absl::MutexLock lock(&inode.mu);
      absl::Status status = AllocateLocked(inode, operation, keep_size, offset, length);
      if (!status.ok()) return status;
      set_id_dropped = DropSetIdOnWrite(inode, caller);
    }
    if (set_id_dropped) AttributesChanged(ino);
    return absl::OkStatus();
  }

  absl::Status AllocateLocked(Inode& inode, int operation, bool keep_size, uint64_t offset,
                              uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(inode.mu) {
    if (inode.is_directory()) return PosixError(EISDIR);
    if (!inode.is_regular()) return PosixError(ENODEV);
    const uint64_t end = offset + length;
    if (operation != 0) {
      // Punching past the end has nothing to do; zeroing past it with
      // KEEP_SIZE only preallocates.
      if (offset < inode.size) {
        const uint64_t punch_end = std::min(end, inode.size);
        if (absl::Status status = inode.data->PunchHole(offset, punch_end - offset);
            !status.ok()) {
          return status;
        }
      }
    }
    if (operation != FALLOC_FL_PUNCH_HOLE) {
      if (absl::Status status = inode.data->Reserve(offset, length); !status.ok()) return status;
      if (!keep_size && end > inode.size) inode.size = end;
    }
    // tmpfs marks every successful fallocate as a modification, KEEP_SIZE
    // included (file_modified() in shmem_fallocate).
    inode.mtime = inode.ctime = Now();
    return absl::OkStatus();
  }

  absl::Status ReadDirectory(InodeNumber ino, uint64_t cookie, bool plus,
                             const std::function<bool(const DirectoryEntry&)>& emit) {
    absl::ReaderMutexLock namespace_lock(&namespace_mu_);
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& dir = **found;
    if (!dir.is_directory()) return PosixError(ENOTDIR);
    // Fills an entry's attributes; "." and ".." never carry a reference.
    auto describe = [&](Inode& inode, DirectoryEntry& entry) {
      absl::ReaderMutexLock lock(&inode.mu);
      if (plus) {
        FillStat(inode, &entry.attr);
      } else {
        entry.attr.st_ino = inode.ino;
        entry.attr.st_mode = inode.mode;
      }
    };
    DirectoryEntry entry;
    if (cookie < Directory::kDotCookie) {
      entry = DirectoryEntry{".", {}, Directory::kDotCookie};
      describe(dir, entry);
      if (!emit(entry)) return absl::OkStatus();
    }
    if (cookie < Directory::kDotDotCookie) {
      std::shared_ptr<Inode> parent = table_.Get(dir.parent);
      entry = DirectoryEntry{"..", {}, Directory::kDotDotCookie};
      describe(parent ? *parent : dir, entry);
      if (!emit(entry)) return absl::OkStatus();
    }
    dir.directory->ForEachAfter(
        std::max(cookie, Directory::kDotDotCookie),
        [&](absl::string_view name, const Directory::Entry& child, uint64_t child_cookie) {
          std::shared_ptr<Inode> inode = table_.Get(child.ino);
          if (!inode) return true;
          entry.name.assign(name.data(), name.size());
          entry.attr = {};
          entry.next_cookie = child_cookie;
          describe(*inode, entry);
          if (!emit(entry)) return false;
          if (plus) table_.AddLookup(*inode);
          return true;
        });
    const timespec now = Now();
    absl::MutexLock lock(&dir.mu);
    if (config_.update_atime && NeedsAtimeUpdate(dir, now)) dir.atime = now;
    return absl::OkStatus();
  }

  absl::Status SetXattr(InodeNumber ino, absl::string_view name, absl::string_view value,
                        int flags) {
    if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
    if (value.size() > kXattrValueMax) return PosixError(E2BIG);
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    absl::MutexLock lock(&inode.mu);
    auto it = inode.xattrs.find(name);
    if ((flags & XATTR_CREATE) && it != inode.xattrs.end()) return PosixError(EEXIST);
    if ((flags & XATTR_REPLACE) && it == inode.xattrs.end()) return PosixError(ENODATA);
    const uint64_t old_bytes =
        it == inode.xattrs.end() ? 0 : Inode::XattrSpaceOf(name, it->second);
    const uint64_t new_bytes = Inode::XattrSpaceOf(name, value);
    if (new_bytes > old_bytes) {
      if (absl::Status status = table_.ReserveSpace(new_bytes - old_bytes); !status.ok()) {
        return status;
      }
    } else {
      table_.ReleaseSpace(old_bytes - new_bytes);
    }
    if (it == inode.xattrs.end()) {
      inode.xattrs.emplace(std::string(name), std::string(value));
    } else {
      it->second.assign(value.data(), value.size());
    }
    inode.ctime = Now();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> GetXattr(InodeNumber ino, absl::string_view name) {
    if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    absl::ReaderMutexLock lock(&inode.mu);
    auto it = inode.xattrs.find(name);
    if (it == inode.xattrs.end()) return PosixError(ENODATA);
    return it->second;
  }

  absl::StatusOr<std::string> ListXattr(InodeNumber ino, const Caller& caller) {
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    absl::ReaderMutexLock lock(&inode.mu);
    std::string names;
    for (const auto& [name, value] : inode.xattrs) {
      // tmpfs lists trusted.* names to CAP_SYS_ADMIN only; a FUSE request
      // carries no capabilities, so uid 0 stands in for it here.
      if (absl::StartsWith(name, "trusted.") && !caller.is_root()) continue;
      names.append(name);
      names.push_back('\0');
    }
    return names;
  }

  absl::Status RemoveXattr(InodeNumber ino, absl::string_view name) {
    if (absl::Status status = ValidateXattrName(name); !status.ok()) return status;
    absl::StatusOr<std::shared_ptr<Inode>> found = Get(ino);
    if (!found.ok()) return found.status();
    Inode& inode = **found;
    absl::MutexLock lock(&inode.mu);
    auto it = inode.xattrs.find(name);
    if (it == inode.xattrs.end()) return PosixError(ENODATA);
    table_.ReleaseSpace(Inode::XattrSpaceOf(name, it->second));
    inode.xattrs.erase(it);
    inode.ctime = Now();
    return absl::OkStatus();
  }

  // The namespaces we keep. Who may read or write which namespace the
  // kernel has checked (xattr_permission() and the LSM hooks, with
  // capabilities).
  static absl::Status ValidateXattrName(absl::string_view name) {
    if (name.empty() || name.size() > kXattrNameMax) return PosixError(ERANGE);
    // A namespace with no name in it: the VFS says EINVAL for filesystems
    // with per-namespace handlers (xattr_resolve_name); FUSE leaves it to us.
    if (name == "trusted." || name == "security." || name == "user.") return PosixError(EINVAL);
    if (absl::StartsWith(name, "trusted.") || absl::StartsWith(name, "security.") ||
        absl::StartsWith(name, "user.")) {
      return absl::OkStatus();
    }
    return PosixError(EOPNOTSUPP);
  }

  Arena* const arena_;
  const FilesystemConfig config_;
  // Before the inode table: files give their pages back when destroyed.
  PageCache cache_;
  InodeTable table_;
  std::shared_ptr<Inode> root_;
  // Guards every Directory and Inode::parent (see the overview above).
  mutable absl::Mutex namespace_mu_;
  // Last, so that it stops first and drains the cache while the inodes are
  // still there. It reaches a file only through FlushFile, which locks it as
  // any writer does.
  WriteBackFlusher flusher_{&cache_, [this](uint64_t ino) { return FlushFile(ino); }};
};

Filesystem::Filesystem(Arena* arena, FilesystemConfig config)
    : impl_(std::make_unique<Impl>(arena, config)), arena_(arena) {}

Filesystem::~Filesystem() = default;

absl::StatusOr<struct stat> Filesystem::Lookup(InodeNumber parent, absl::string_view name) {
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  std::shared_ptr<Inode> inode;
  {
    absl::ReaderMutexLock namespace_lock(&impl_->namespace_mu_);
    absl::StatusOr<std::shared_ptr<Inode>> dir = impl_->GetDirectory(parent);
    if (!dir.ok()) return dir.status();
    InodeNumber ino;
    if (name == ".") {
      ino = parent;
    } else if (name == "..") {
      ino = (*dir)->parent;
    } else {
      std::optional<Directory::Entry> entry = (*dir)->directory->Find(name);
      if (!entry) return PosixError(ENOENT);
      ino = entry->ino;
    }
    absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
    if (!found.ok()) return found.status();
    inode = *found;
    // Take the reference before the namespace lock goes, so a racing
    // unlink cannot drop the inode in between.
    impl_->table_.AddLookup(*inode);
  }
  absl::ReaderMutexLock lock(&inode->mu);
  struct stat st;
  FillStat(*inode, &st);
  return st;
}

void Filesystem::Forget(InodeNumber ino, uint64_t count) {
  if (std::shared_ptr<Inode> inode = impl_->table_.Get(ino)) impl_->table_.Forget(inode, count);
}

absl::StatusOr<struct stat> Filesystem::MakeNode(InodeNumber parent, absl::string_view name,
                                                 mode_t mode, dev_t rdev, const Caller& caller) {
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFIFO:
    case S_IFSOCK:
      rdev = 0;
      break;
    case S_IFCHR:
    case S_IFBLK:  // the kernel has checked CAP_MKNOD
      break;
    case 0:
      mode |= S_IFREG;  // mknod(2): a zero type means a regular file
      break;
    case S_IFDIR:
      return PosixError(EPERM);
    default:
      return PosixError(EINVAL);
  }
  return impl_->CreateNamed(parent, name, mode, rdev, caller, [](Inode&) {}, false);
}

absl::StatusOr<struct stat> Filesystem::MakeDirectory(InodeNumber parent, absl::string_view name,
                                                      mode_t mode, const Caller& caller) {
  return impl_->CreateNamed(parent, name, S_IFDIR | (mode & 07777), 0, caller, [](Inode&) {},
                            false);
}

absl::StatusOr<struct stat> Filesystem::SymbolicLink(InodeNumber parent, absl::string_view name,
                                                     absl::string_view target,
                                                     const Caller& caller) {
  if (target.empty()) return PosixError(ENOENT);
  if (target.size() > kSymlinkMax) return PosixError(ENAMETOOLONG);
  return impl_->CreateNamed(
      parent, name, S_IFLNK | 0777, 0, caller,
      [&](Inode& inode) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        inode.symlink_target = std::string(target);
        inode.size = target.size();
      },
      false);
}

absl::StatusOr<struct stat> Filesystem::Link(InodeNumber ino, InodeNumber new_parent,
                                             absl::string_view new_name) {
  if (absl::Status status = ValidateName(new_name); !status.ok()) return status;
  absl::MutexLock namespace_lock(&impl_->namespace_mu_);
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  if (inode.is_directory()) return PosixError(EPERM);
  absl::StatusOr<std::shared_ptr<Inode>> dir = impl_->GetDirectory(new_parent);
  if (!dir.ok()) return dir.status();
  if (IsDotOrDotDot(new_name) || (*dir)->directory->Find(new_name)) return PosixError(EEXIST);
  const timespec now = Now();
  struct stat st;
  {
    InodePairLock lock(**dir, inode);
    if (inode.nlink == 0) return PosixError(ENOENT);  // unlinked but still open
    // Every name past the first takes an inode slot, as in tmpfs: links
    // cannot grow the daemon's memory past nr_inodes.
    if (absl::Status status = impl_->table_.ReserveSpace(InodeTable::kSlotBytes); !status.ok()) {
      return status;
    }
    ++inode.nlink;
    inode.ctime = now;
    (*dir)->mtime = (*dir)->ctime = now;
    FillStat(inode, &st);
  }
  (*dir)->directory->Insert(new_name, Directory::Entry{inode.ino, inode.type});
  impl_->table_.AddLookup(inode);
  return st;
}

absl::Status Filesystem::Unlink(InodeNumber parent, absl::string_view name) {
  return impl_->RemoveNamed(parent, name, /*directory=*/false);
}

absl::Status Filesystem::RemoveDirectory(InodeNumber parent, absl::string_view name) {
  return impl_->RemoveNamed(parent, name, /*directory=*/true);
}

absl::Status Filesystem::Rename(InodeNumber parent, absl::string_view name,
                                InodeNumber new_parent, absl::string_view new_name,
                                unsigned flags) {
  return impl_->Rename(parent, name, new_parent, new_name, flags);
}

absl::StatusOr<std::string> Filesystem::ReadLink(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  if (!inode.is_symlink()) return PosixError(EINVAL);
  // Reading a link is an access (touch_atime in do_readlinkat and when a
  // path follows it), with the relatime rules of a read.
  if (impl_->TouchAtime(inode)) impl_->AttributesChanged(ino);
  return inode.symlink_target;
}

absl::StatusOr<struct stat> Filesystem::GetAttributes(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  absl::ReaderMutexLock lock(&(*found)->mu);
  struct stat st;
  FillStat(**found, &st);
  return st;
}

absl::StatusOr<struct stat> Filesystem::SetAttributes(InodeNumber ino,
                                                      const AttributeChanges& changes,
                                                      const Caller& caller) {
  return impl_->SetAttributes(ino, changes, caller);
}

absl::StatusOr<struct stat> Filesystem::Create(InodeNumber parent, absl::string_view name,
                                               mode_t mode, int /*flags*/, const Caller& caller) {
  // The kernel has applied O_EXCL; O_TRUNC and the rest mean nothing for a
  // file that did not exist.
  return impl_->CreateNamed(parent, name, S_IFREG | (mode & 07777), 0, caller, [](Inode&) {},
                            /*open=*/true);
}

absl::StatusOr<uint64_t> Filesystem::Open(InodeNumber ino, int flags, const Caller& caller) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  const int access = flags & O_ACCMODE;
  bool set_id_dropped = false;
  uint64_t size;
  {
    absl::MutexLock lock(&inode.mu);
    if (inode.is_directory() && (access != O_RDONLY || (flags & O_TRUNC))) {
      return PosixError(EISDIR);
    }
    if ((flags & O_TRUNC) && inode.is_regular()) {
      if (absl::Status status = inode.data->Truncate(0); !status.ok()) return status;
      inode.size = 0;
      inode.mtime = inode.ctime = Now();
      set_id_dropped = DropSetIdOnWrite(inode, caller);
    }
    size = inode.size;
  }
  if (set_id_dropped) impl_->AttributesChanged(ino);
  impl_->table_.AddOpen(inode);
  return size;
}

void Filesystem::MarkAccessed(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (found.ok() && impl_->TouchAtime(**found)) impl_->AttributesChanged(ino);
}

void Filesystem::Release(InodeNumber ino) {
  std::shared_ptr<Inode> inode = impl_->table_.Get(ino);
  if (!inode || !impl_->table_.Release(inode) || !inode->is_regular()) return;
  // The last writer is gone: what growth reserved past the end goes back
  // (see ExtentMap). A file opened again and appended to grows anew.
  absl::MutexLock lock(&inode->mu);
  if (inode->data) inode->data->TrimTail(inode->size);
}

absl::Status Filesystem::Fsync(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  return impl_->FlushFile(ino);
}

PageCacheStats Filesystem::CacheStats() const { return impl_->CacheStats(); }

absl::StatusOr<size_t> Filesystem::Read(InodeNumber ino, uint64_t offset, size_t size,
                                        char* out, bool update_atime) {
  return impl_->Read(ino, offset, size, out, update_atime);
}

absl::StatusOr<size_t> Filesystem::Write(InodeNumber ino, uint64_t offset, const char* data,
                                         size_t size, bool append, const Caller& caller) {
  return impl_->Write(ino, offset, data, size, append, caller);
}

absl::Status Filesystem::Allocate(InodeNumber ino, int mode, uint64_t offset, uint64_t length,
                                  const Caller& caller) {
  return impl_->Allocate(ino, mode, offset, length, caller);
}

absl::StatusOr<uint64_t> Filesystem::Seek(InodeNumber ino, uint64_t offset, int whence) {
  absl::StatusOr<std::shared_ptr<Inode>> found = impl_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  absl::ReaderMutexLock lock(&inode.mu);
  if (!inode.is_regular()) return PosixError(EINVAL);
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return PosixError(EINVAL);
  if (offset >= inode.size) return PosixError(ENXIO);
  if (whence == SEEK_HOLE) return std::min(inode.data->NextHole(offset), inode.size);
  std::optional<uint64_t> data = inode.data->NextData(offset);
  if (!data || *data >= inode.size) return PosixError(ENXIO);
  return *data;
}

absl::StatusOr<size_t> Filesystem::CopyFileRange(InodeNumber in, uint64_t in_offset,
                                                 InodeNumber out, uint64_t out_offset,
                                                 size_t length, const Caller& caller) {
  return impl_->CopyFileRange(in, in_offset, out, out_offset, length, caller);
}

absl::Status Filesystem::ReadDirectory(InodeNumber ino, uint64_t cookie, bool plus,
                                       const std::function<bool(const DirectoryEntry&)>& emit) {
  return impl_->ReadDirectory(ino, cookie, plus, emit);
}

absl::Status Filesystem::SetExtendedAttribute(InodeNumber ino, absl::string_view name,
                                              absl::string_view value, int flags) {
  return impl_->SetXattr(ino, name, value, flags);
}

absl::StatusOr<std::string> Filesystem::GetExtendedAttribute(InodeNumber ino,
                                                             absl::string_view name) {
  return impl_->GetXattr(ino, name);
}

absl::StatusOr<std::string> Filesystem::ListExtendedAttributes(InodeNumber ino,
                                                               const Caller& caller) {
  return impl_->ListXattr(ino, caller);
}

absl::Status Filesystem::RemoveExtendedAttribute(InodeNumber ino, absl::string_view name) {
  return impl_->RemoveXattr(ino, name);
}

struct statvfs Filesystem::StatFs() {
  const ArenaStats stats = arena_->Stats();
  const uint64_t block = arena_->min_block();
  struct statvfs st = {};
  st.f_bsize = block;
  st.f_frsize = block;
  st.f_blocks = stats.blocks.capacity / block;
  st.f_bfree = stats.blocks.free / block;
  st.f_bavail = st.f_bfree;
  // Free inodes are free inode space in slots, so hard links and extended
  // attributes show in df -i as they do on tmpfs.
  st.f_files = impl_->table_.max_inodes();
  st.f_ffree = impl_->table_.free_slots();
  st.f_favail = st.f_ffree;
  st.f_namemax = kNameMax;
  return st;
}

}  // namespace cudafs
