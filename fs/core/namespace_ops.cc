// The namespace operations of Filesystem: names in directories, and what
// creating or removing a name does to inodes (see filesystem_state.h for
// the one-place rule, filesystem.cc for the locking).
#include <fcntl.h>
#include <linux/fs.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_scope.h"

namespace cudafs {
namespace {

constexpr size_t kSymlinkMax = 4095;  // PATH_MAX - 1

absl::Status ValidateName(absl::string_view name) {
  if (name.empty()) return PosixError(ENOENT);
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  if (name.find('/') != absl::string_view::npos) return PosixError(EINVAL);
  return absl::OkStatus();
}

bool IsDotOrDotDot(absl::string_view name) { return name == "." || name == ".."; }

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

// The inode `name` names in directory `parent`. "." is `parent` itself,
// whatever its type: the kernel looks up "." to turn a file handle (NFS
// export, open_by_handle_at) back into an inode it no longer caches. A
// handle is good while the inode has a name; after, the kernel says ESTALE.
absl::StatusOr<std::shared_ptr<Inode>> Named(const FilesystemState& state, InodeNumber parent,
                                             absl::string_view name)
    ABSL_SHARED_LOCKS_REQUIRED(state.namespace_mu) {
  if (name == ".") {
    CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> self, state.Get(parent));
    absl::ReaderMutexLock lock(&self->mu);
    if (self->nlink == 0) return PosixError(ENOENT, "removed");
    return self;
  }
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> dir, state.GetDirectory(parent));
  state.ReadsNamespace();
  if (name == "..") return state.Get(dir->directory().parent());
  std::optional<Directory::Entry> entry = dir->directory().Find(name);
  if (!entry) return PosixError(ENOENT);
  return state.Get(entry->ino);
}

// Creates an inode named `name` in `parent` and returns its attributes
// with one lookup reference. `setup` fills type-specific state before the
// inode becomes visible.
absl::StatusOr<struct stat> CreateNamed(FilesystemState& state, InodeNumber parent,
                                        absl::string_view name, mode_t mode, dev_t rdev,
                                        const Caller& caller,
                                        const std::function<void(Inode&)>& setup, bool open) {
  CUDAFS_RETURN_IF_ERROR(ValidateName(name));
  JournalScope journal(state);
  absl::MutexLock namespace_lock(&state.namespace_mu);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> dir, state.GetDirectory(parent));
  state.WritesNamespace();
  if (IsDotOrDotDot(name) || dir->directory().Find(name)) return PosixError(EEXIST);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> created, state.table.Create(mode));
  Inode& inode = *created;
  const timespec now = Now();
  struct stat st;
  {
    absl::MutexLock dir_lock(&dir->mu);
    absl::MutexLock lock(&inode.mu);
    const Ownership owner = OwnershipOfNew(mode, caller, dir->mode, dir->gid);
    inode.mode = owner.mode;
    inode.uid = owner.uid;
    inode.gid = owner.gid;
    if (inode.is_device()) inode.set_rdev(rdev);
    inode.atime = inode.mtime = inode.ctime = now;
    if (inode.is_directory()) {
      inode.nlink = 2;
      inode.mutable_directory().set_parent(parent);
      ++dir->nlink;
    } else {
      inode.nlink = 1;
    }
    setup(inode);
    dir->mtime = dir->ctime = now;
    FillStat(inode, &st);
  }
  dir->mutable_directory().Insert(name, Directory::Entry{inode.ino, inode.type});
  state.table.AddLookup(inode);
  if (open) state.table.AddOpen(inode);
  JournalScope::Attributes(parent);  // its times, and a new directory's link
  JournalScope::Inode(inode.ino);
  JournalScope::Entry(parent, name);
  return st;
}

// Bookkeeping for an inode losing one name in `dir`. A name that was not
// the last gives back the inode slot Link took for it; the last one's
// slot goes with the inode.
void Unname(FilesystemState& state, Inode& dir, Inode& victim, const timespec& now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(dir.mu, victim.mu) {
  if (victim.is_directory()) {
    victim.nlink = 0;
    --dir.nlink;
  } else {
    if (victim.nlink > 1) state.table.ReleaseSpace(InodeTable::kSlotBytes);
    --victim.nlink;
  }
  victim.ctime = now;
}

// Removes `name` from `parent` (unlink or rmdir).
absl::Status RemoveNamed(FilesystemState& state, InodeNumber parent, absl::string_view name,
                         bool directory) {
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  if (directory && name == ".") return PosixError(EINVAL);
  if (directory && name == "..") return PosixError(ENOTEMPTY);
  JournalScope journal(state);
  std::shared_ptr<Inode> victim;
  {
    absl::MutexLock namespace_lock(&state.namespace_mu);
    CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> dir, state.GetDirectory(parent));
    state.WritesNamespace();
    std::optional<Directory::Entry> entry = dir->directory().Find(name);
    if (!entry) return PosixError(ENOENT);
    if (directory && entry->type != S_IFDIR) return PosixError(ENOTDIR);
    if (!directory && entry->type == S_IFDIR) return PosixError(EISDIR);
    CUDAFS_ASSIGN_OR_RETURN(victim, state.Get(entry->ino));
    if (directory && !victim->directory().empty()) return PosixError(ENOTEMPTY);
    const timespec now = Now();
    InodePairLock lock(*dir, *victim);
    dir->mutable_directory().Erase(name);
    Unname(state, *dir, *victim, now);
    dir->mtime = dir->ctime = now;
  }
  state.table.DropIfUnused(victim);
  JournalScope::Attributes(parent);       // its times, and a directory's link
  JournalScope::Attributes(victim->ino);  // its link count
  JournalScope::Entry(parent, name);
  return absl::OkStatus();
}

// True when `ancestor` is `ino` or one of its parents.
bool IsAncestor(const FilesystemState& state, InodeNumber ancestor, InodeNumber ino)
    ABSL_SHARED_LOCKS_REQUIRED(state.namespace_mu) {
  state.ReadsNamespace();
  for (InodeNumber current = ino;;) {
    if (current == ancestor) return true;
    if (current == kRootInode) return false;
    std::shared_ptr<Inode> inode = state.table.Get(current);
    if (!inode || !inode->is_directory()) return false;
    current = inode->directory().parent();
  }
}

// The inodes involved are locked by the caller, in a sorted loop.
void RenameLocked(FilesystemState& state, Inode& from_dir, absl::string_view name, Inode& to_dir,
                  absl::string_view new_name, Inode& moved, Inode* replaced, bool exchange)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.namespace_mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const bool cross = &from_dir != &to_dir;
  const timespec now = Now();
  const Directory::Entry moved_entry{moved.ino, moved.type};
  if (exchange) {
    const Directory::Entry replaced_entry{replaced->ino, replaced->type};
    from_dir.mutable_directory().Replace(name, replaced_entry);
    to_dir.mutable_directory().Replace(new_name, moved_entry);
    if (cross) {
      if (moved.is_directory()) {
        moved.mutable_directory().set_parent(to_dir.ino);
        --from_dir.nlink;
        ++to_dir.nlink;
      }
      if (replaced->is_directory()) {
        replaced->mutable_directory().set_parent(from_dir.ino);
        --to_dir.nlink;
        ++from_dir.nlink;
      }
    }
    replaced->ctime = now;
  } else {
    if (replaced) {
      to_dir.mutable_directory().Replace(new_name, moved_entry);
      Unname(state, to_dir, *replaced, now);
    } else {
      to_dir.mutable_directory().Insert(new_name, moved_entry);
    }
    from_dir.mutable_directory().Erase(name);
    if (moved.is_directory() && cross) {
      moved.mutable_directory().set_parent(to_dir.ino);
      --from_dir.nlink;
      ++to_dir.nlink;
    }
  }
  moved.ctime = now;
  from_dir.mtime = from_dir.ctime = now;
  to_dir.mtime = to_dir.ctime = now;
}

}  // namespace

absl::StatusOr<struct stat> Filesystem::Lookup(InodeNumber parent, absl::string_view name) {
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  std::shared_ptr<Inode> inode;
  {
    absl::ReaderMutexLock namespace_lock(&state_->namespace_mu);
    state_->ReadsNamespace();
    CUDAFS_ASSIGN_OR_RETURN(inode, Named(*state_, parent, name));
    // Take the reference before the namespace lock goes, so a racing
    // unlink cannot drop the inode in between.
    state_->table.AddLookup(*inode);
  }
  absl::ReaderMutexLock lock(&inode->mu);
  struct stat st;
  FillStat(*inode, &st);
  return st;
}

void Filesystem::Forget(InodeNumber ino, uint64_t count) {
  // Frees its blocks once its last reference is gone, which its record
  // ('G', from the table) precedes.
  JournalScope journal(*state_);
  if (std::shared_ptr<Inode> inode = state_->table.Get(ino)) state_->table.Forget(inode, count);
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
  return CreateNamed(
      *state_, parent, name, mode, rdev, caller, [](Inode&) {}, false);
}

absl::StatusOr<struct stat> Filesystem::MakeDirectory(InodeNumber parent, absl::string_view name,
                                                      mode_t mode, const Caller& caller) {
  return CreateNamed(
      *state_, parent, name, S_IFDIR | (mode & 07777), 0, caller, [](Inode&) {}, false);
}

absl::StatusOr<struct stat> Filesystem::SymbolicLink(InodeNumber parent, absl::string_view name,
                                                     absl::string_view target,
                                                     const Caller& caller) {
  if (target.empty()) return PosixError(ENOENT);
  if (target.size() > kSymlinkMax) return PosixError(ENAMETOOLONG);
  CUDAFS_RETURN_IF_ERROR(ValidateName(name));
  CUDAFS_ASSIGN_OR_RETURN(std::unique_ptr<const SymlinkTarget> stored,
                          SymlinkTarget::Make(&state_->symlink_space, target));
  return CreateNamed(
      *state_, parent, name, S_IFLNK | 0777, 0, caller,
      [&](Inode& inode) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        inode.size = target.size();
        inode.set_symlink_target(std::move(stored));
      },
      false);
}

absl::StatusOr<struct stat> Filesystem::Create(InodeNumber parent, absl::string_view name,
                                               mode_t mode, int /*flags*/, const Caller& caller,
                                               Handle handle) {
  // The kernel has applied O_EXCL; O_TRUNC and the rest mean nothing for a
  // file that did not exist.
  return CreateNamed(
      *state_, parent, name, S_IFREG | (mode & 07777), 0, caller, [](Inode&) {},
      /*open=*/handle == Handle::kCounted);
}

absl::StatusOr<struct stat> Filesystem::Link(InodeNumber ino, InodeNumber new_parent,
                                             absl::string_view new_name) {
  CUDAFS_RETURN_IF_ERROR(ValidateName(new_name));
  JournalScope journal(*state_);
  absl::MutexLock namespace_lock(&state_->namespace_mu);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (inode.is_directory()) return PosixError(EPERM);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> dir, state_->GetDirectory(new_parent));
  state_->WritesNamespace();
  if (IsDotOrDotDot(new_name) || dir->directory().Find(new_name)) return PosixError(EEXIST);
  const timespec now = Now();
  struct stat st;
  {
    InodePairLock lock(*dir, inode);
    if (inode.nlink == 0) return PosixError(ENOENT);  // unlinked but still open
    // Every name past the first takes an inode slot, as in tmpfs: links
    // cannot grow the daemon's memory past nr_inodes.
    CUDAFS_RETURN_IF_ERROR(state_->table.ReserveSpace(InodeTable::kSlotBytes));
    ++inode.nlink;
    inode.ctime = now;
    dir->mtime = dir->ctime = now;
    FillStat(inode, &st);
  }
  dir->mutable_directory().Insert(new_name, Directory::Entry{inode.ino, inode.type});
  state_->table.AddLookup(inode);
  JournalScope::Attributes(ino);  // its link count
  JournalScope::Attributes(new_parent);  // its times
  JournalScope::Entry(new_parent, new_name);
  return st;
}

absl::Status Filesystem::Unlink(InodeNumber parent, absl::string_view name) {
  return RemoveNamed(*state_, parent, name, /*directory=*/false);
}

absl::Status Filesystem::RemoveDirectory(InodeNumber parent, absl::string_view name) {
  return RemoveNamed(*state_, parent, name, /*directory=*/true);
}

absl::Status Filesystem::Rename(InodeNumber parent, absl::string_view name, InodeNumber new_parent,
                                absl::string_view new_name, unsigned flags, uint64_t request) {
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
      ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))) {
    return PosixError(EINVAL);
  }
  const bool exchange = flags & RENAME_EXCHANGE;
  if (name.size() > kNameMax) return PosixError(ENAMETOOLONG);
  CUDAFS_RETURN_IF_ERROR(ValidateName(new_name));
  if (IsDotOrDotDot(name) || IsDotOrDotDot(new_name)) return PosixError(EBUSY);
  JournalScope journal(*state_);
  std::shared_ptr<Inode> victim;
  {
    absl::MutexLock namespace_lock(&state_->namespace_mu);
    CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> from_dir, state_->GetDirectory(parent));
    CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> to_dir, state_->GetDirectory(new_parent));
    state_->ReadsNamespace();
    std::optional<Directory::Entry> source = from_dir->directory().Find(name);
    if (!source) return PosixError(ENOENT);
    std::optional<Directory::Entry> target = to_dir->directory().Find(new_name);
    if ((flags & RENAME_NOREPLACE) && target) return PosixError(EEXIST);
    if (exchange && !target) return PosixError(ENOENT);
    if (target && target->ino == source->ino) return absl::OkStatus();  // same file

    CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> moved, state_->Get(source->ino));
    std::shared_ptr<Inode> replaced;
    if (target) {
      CUDAFS_ASSIGN_OR_RETURN(replaced, state_->Get(target->ino));
    }
    const bool moved_is_dir = moved->is_directory();
    const bool replaced_is_dir = replaced && replaced->is_directory();
    const bool cross = parent != new_parent;
    // A directory may not move below itself; for an exchange, neither.
    if (moved_is_dir && cross && IsAncestor(*state_, source->ino, new_parent)) {
      return PosixError(EINVAL);
    }
    if (exchange && replaced_is_dir && cross && IsAncestor(*state_, target->ino, parent)) {
      return PosixError(EINVAL);
    }
    if (!exchange && replaced) {
      if (moved_is_dir && !replaced_is_dir) return PosixError(ENOTDIR);
      if (!moved_is_dir && replaced_is_dir) return PosixError(EISDIR);
      if (replaced_is_dir) {
        if (!replaced->directory().empty()) return PosixError(ENOTEMPTY);
      }
    }

    // Lock every inode involved, in inode-number order; safe because the
    // namespace lock is held exclusively, so no other thread holds two.
    std::vector<Inode*> involved = {from_dir.get(), to_dir.get(), moved.get()};
    if (replaced) involved.push_back(replaced.get());
    std::sort(involved.begin(), involved.end(), [](Inode* a, Inode* b) { return a->ino < b->ino; });
    involved.erase(std::unique(involved.begin(), involved.end()), involved.end());
    LockAll(involved);
    RenameLocked(*state_, *from_dir, name, *to_dir, new_name, *moved, replaced.get(), exchange);
    UnlockAll(involved);
    // Link counts and times; and a directory moved to another parent's
    // record is whole, for its parent.
    for (const Inode* inode : involved) JournalScope::Attributes(inode->ino);
    if (moved_is_dir && cross) JournalScope::Inode(moved->ino);
    JournalScope::Entry(parent, name);
    JournalScope::Entry(new_parent, new_name);
    if (exchange && request != 0) JournalScope::Exchanged(request);
    if (!exchange) victim = replaced;
  }
  if (victim) state_->table.DropIfUnused(victim);
  return absl::OkStatus();
}

bool Filesystem::ExchangeDone(uint64_t request) {
  absl::MutexLock lock(&state_->done_mu);
  return state_->exchanges_done.contains(request);
}

absl::StatusOr<std::string> Filesystem::ReadLink(InodeNumber ino) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (!inode.is_symlink()) return PosixError(EINVAL);
  // Reading a link is an access (touch_atime in do_readlinkat and when a
  // path follows it), with the relatime rules of a read.
  JournalScope journal(*state_);
  if (state_->TouchAtime(inode)) {
    JournalScope::Attributes(ino);
    state_->AttributesChanged(ino);
  }
  return inode.symlink_target().Read();
}

absl::Status Filesystem::ReadDirectory(InodeNumber ino, uint64_t cookie, bool plus,
                                       const std::function<bool(const DirectoryEntry&)>& emit) {
  JournalScope journal(*state_);
  absl::ReaderMutexLock namespace_lock(&state_->namespace_mu);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& dir = *found;
  if (!dir.is_directory()) return PosixError(ENOTDIR);
  state_->ReadsNamespace();
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
    std::shared_ptr<Inode> parent = state_->table.Get(dir.directory().parent());
    entry = DirectoryEntry{"..", {}, Directory::kDotDotCookie};
    describe(parent ? *parent : dir, entry);
    if (!emit(entry)) return absl::OkStatus();
  }
  dir.directory().ForEachAfter(
      std::max(cookie, Directory::kDotDotCookie),
      [&](absl::string_view name, const Directory::Entry& child, uint64_t child_cookie) {
        std::shared_ptr<Inode> inode = state_->table.Get(child.ino);
        if (!inode) return true;
        entry.name.assign(name.data(), name.size());
        entry.attr = {};
        entry.next_cookie = child_cookie;
        describe(*inode, entry);
        if (!emit(entry)) return false;
        if (plus) state_->table.AddLookup(*inode);
        return true;
      });
  const timespec now = Now();
  absl::MutexLock lock(&dir.mu);
  if (state_->config.update_atime && NeedsAtimeUpdate(dir, now)) {
    dir.atime = now;
    JournalScope::Attributes(ino);
  }
  return absl::OkStatus();
}

}  // namespace cudafs
