// The file-data operations of Filesystem: opening, reading, writing,
// allocating, seeking and copying the data of regular files (see
// filesystem_state.h for the one-place rule, filesystem.cc for the locking;
// Fsync is there, beside the write-back).
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_scope.h"

namespace cudafs {
namespace {

// The data of regular file `inode`, made on first use: a file that never
// stored a byte has none, and reads as holes (see Inode::data).
CachedFile& DataOf(FilesystemState& state, Inode& inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(inode.mu) {
  if (!inode.data()) {
    inode.set_data(std::make_unique<CachedFile>(&state.file_space, inode.ino));
  }
  return *inode.data();
}

absl::StatusOr<size_t> CopyLocked(
    FilesystemState& state, Inode& from, uint64_t in_offset, Inode& to, uint64_t out_offset,
    size_t length, const Caller& caller, bool* set_id_dropped,
    bool* source_accessed) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // both locked by the caller
  if (in_offset >= from.size) return 0;
  const uint64_t count = std::min<uint64_t>(length, from.size - in_offset);
  if (out_offset > kMaxFileSize || count > kMaxFileSize - out_offset) return PosixError(EFBIG);
  // The source's holes become zeroed blocks of the target, so a source
  // with no data still takes part, as an empty one.
  CUDAFS_RETURN_IF_ERROR(DataOf(state, to).CopyFrom(DataOf(state, from), in_offset, from.size,
                                                    out_offset, count, to.size));
  to.size = std::max<uint64_t>(to.size, out_offset + count);
  to.mtime = to.ctime = Now();
  *set_id_dropped = DropSetIdOnWrite(to, caller);
  if (state.config.update_atime && NeedsAtimeUpdate(from, to.mtime)) {
    from.atime = to.mtime;
    *source_accessed = true;
  }
  return count;
}

absl::Status AllocateLocked(FilesystemState& state, Inode& inode, int operation, bool keep_size,
                            uint64_t offset, uint64_t length)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(inode.mu) {
  if (inode.is_directory()) return PosixError(EISDIR);
  if (!inode.is_regular()) return PosixError(ENODEV);
  const uint64_t end = offset + length;
  if (operation != 0 && inode.data()) {
    // A punch frees what lies past the end too, as tmpfs does: blocks
    // reserved with KEEP_SIZE, and the min_block holding the end. Zeroing
    // past the end has nothing to zero (with KEEP_SIZE it only
    // preallocates, below).
    const uint64_t punch_end = operation == FALLOC_FL_PUNCH_HOLE ? end : std::min(end, inode.size);
    if (offset < punch_end) {
      CUDAFS_RETURN_IF_ERROR(inode.data()->PunchHole(offset, punch_end - offset));
    }
  }
  if (operation != FALLOC_FL_PUNCH_HOLE) {
    CUDAFS_RETURN_IF_ERROR(DataOf(state, inode).Reserve(offset, length));
    if (!keep_size && end > inode.size) inode.size = end;
  }
  // tmpfs marks every successful fallocate as a modification, KEEP_SIZE
  // included (file_modified() in shmem_fallocate).
  inode.mtime = inode.ctime = Now();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> Filesystem::Open(InodeNumber ino, int flags, const Caller& caller) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  const int access = flags & O_ACCMODE;
  bool set_id_dropped = false;
  uint64_t size;
  {
    absl::MutexLock lock(&inode.mu);
    if (inode.is_directory() && (access != O_RDONLY || (flags & O_TRUNC))) {
      return PosixError(EISDIR);
    }
    if ((flags & O_TRUNC) && inode.is_regular()) {
      if (inode.data()) {
        CUDAFS_RETURN_IF_ERROR(inode.data()->Truncate(0));
      }
      inode.size = 0;
      inode.mtime = inode.ctime = Now();
      set_id_dropped = DropSetIdOnWrite(inode, caller);
    }
    size = inode.size;
  }
  if (set_id_dropped) state_->AttributesChanged(ino);
  state_->table.AddOpen(inode);
  if (flags & O_TRUNC) JournalScope::Inode(ino);
  return size;
}

void Filesystem::Release(InodeNumber ino) {
  JournalScope journal(*state_);
  std::shared_ptr<Inode> inode = state_->table.Get(ino);
  // The last writer is gone: what growth reserved past the end goes back
  // (see ExtentMap). A file opened again and appended to grows anew.
  if (inode && state_->table.Release(inode) && state_->TrimGrowth(*inode)) {
    JournalScope::Inode(ino);
  }
}

void Filesystem::TrimIdleGrowth(absl::Duration idle) {
  const absl::Time cutoff = absl::Now() - idle;
  std::vector<InodeNumber> due;
  {
    absl::MutexLock lock(&state_->growing_mu);
    for (auto it = state_->growing.begin(); it != state_->growing.end();) {
      if (it->second <= cutoff) {
        due.push_back(it->first);
        state_->growing.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (InodeNumber ino : due) {
    JournalScope journal(*state_);
    std::shared_ptr<Inode> inode = state_->table.Get(ino);
    if (inode && state_->TrimGrowth(*inode)) JournalScope::Inode(ino);
  }
}

void Filesystem::MarkAccessed(InodeNumber ino) {
  JournalScope journal(*state_);
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (found.ok() && state_->TouchAtime(**found)) {
    JournalScope::Attributes(ino);
    state_->AttributesChanged(ino);
  }
}

absl::StatusOr<size_t> Filesystem::Read(InodeNumber ino, uint64_t offset, size_t size, char* out,
                                        bool update_atime) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  size_t length = 0;
  bool touch_atime = false;
  const timespec now = Now();
  {
    absl::ReaderMutexLock lock(&inode.mu);
    if (inode.is_directory()) return PosixError(EISDIR);
    if (!inode.is_regular()) return PosixError(EINVAL);
    if (offset < inode.size) length = std::min<uint64_t>(size, inode.size - offset);
    if (length > 0 && !inode.data()) {
      std::memset(out, 0, length);
    } else if (length > 0) {
      CUDAFS_RETURN_IF_ERROR(inode.data()->Read(offset, length, out, inode.size));
    }
    touch_atime = update_atime && state_->config.update_atime && NeedsAtimeUpdate(inode, now);
  }
  if (touch_atime) {
    absl::MutexLock lock(&inode.mu);
    inode.atime = now;
    JournalScope::Attributes(ino);
  }
  return length;
}

absl::StatusOr<size_t> Filesystem::Write(InodeNumber ino, uint64_t offset, const char* data,
                                         size_t size, bool append, const Caller& caller) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  bool set_id_dropped;
  bool grew;
  {
    absl::MutexLock lock(&inode.mu);
    if (inode.is_directory()) return PosixError(EISDIR);
    if (!inode.is_regular()) return PosixError(EINVAL);
    if (append) offset = inode.size;
    if (offset > kMaxFileSize || size > kMaxFileSize - offset) return PosixError(EFBIG);
    if (size == 0) return 0;
    CUDAFS_RETURN_IF_ERROR(DataOf(*state_, inode).Write(offset, data, size, inode.size));
    inode.size = std::max<uint64_t>(inode.size, offset + size);
    inode.mtime = inode.ctime = Now();
    set_id_dropped = DropSetIdOnWrite(inode, caller);
    const uint64_t min_block = state_->arena->min_block();
    grew = inode.data()->allocated_bytes() > (inode.size + min_block - 1) / min_block * min_block;
    JournalScope::FileWritten(ino, offset, offset + size);
  }
  if (grew) state_->NoteGrowth(ino);
  if (set_id_dropped) state_->AttributesChanged(ino);
  return size;
}

absl::StatusOr<Filesystem::CopyPlan> Filesystem::PlanCopy(InodeNumber ino) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  // Exclusive: the flush places cached bytes, and the plan follows where
  // they lie.
  absl::MutexLock lock(&inode.mu);
  if (inode.is_directory()) return PosixError(EISDIR);
  if (!inode.is_regular() || inode.size == 0) return PosixError(EINVAL, "nothing to map");
  absl::StatusOr<std::vector<Exporter::CopyPiece>> pieces =
      DataOf(*state_, inode).PlanCopy(inode.size);
  if (absl::IsResourceExhausted(pieces.status())) {
    return PosixError(ENOSPC, "the file's bytes are in host memory and no GPU has room for "
                              "them: make room (cudafs --make-room), or read the file");
  }
  if (absl::IsUnimplemented(pieces.status())) {
    return PosixError(EOPNOTSUPP, pieces.status().message());
  }
  if (!pieces.ok()) return pieces.status();
  return CopyPlan{inode.size, *std::move(pieces)};
}

absl::StatusOr<uint64_t> Filesystem::FillCopy(InodeNumber ino,
                                              absl::Span<const Exporter::CopyMemory> memory) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  // Exclusive: the flush changes the arena, and no write may come between
  // it and the copy.
  absl::MutexLock lock(&inode.mu);
  if (!inode.is_regular()) return PosixError(EINVAL, "only regular files can be mapped");
  uint64_t memory_bytes = 0;
  for (const Exporter::CopyMemory& piece : memory) memory_bytes += piece.bytes;
  // A file that grew since PlanCopy is copied as far as the memory goes,
  // as a read(2) into a buffer of that size would be.
  const uint64_t size = std::min<uint64_t>(inode.size, memory_bytes);
  absl::Status status = DataOf(*state_, inode).CopyInto(memory, size);
  if (absl::IsUnimplemented(status)) return PosixError(EOPNOTSUPP, status.message());
  if (absl::IsFailedPrecondition(status)) {
    return PosixError(EAGAIN, absl::StrCat("the file changed while it was copied (",
                                           status.message(), "): map it again"));
  }
  if (!status.ok()) return status;
  return size;
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> Filesystem::ExportShared(InodeNumber ino) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  // Exclusive: the layout may change, and no write may come between that
  // and the export.
  absl::MutexLock lock(&inode.mu);
  if (inode.is_directory()) return PosixError(EISDIR);
  if (!inode.is_regular()) return PosixError(EINVAL, "only regular files can be mapped");
  // The journal has no record of a mapping another process holds: a
  // successor would free its blocks under it.
  if (state_->config.metadata_log != nullptr) {
    return PosixError(EOPNOTSUPP,
                      "a mount that survives its daemon (survive=on) shares no file's memory "
                      "with another process: open the file read-only for a copy");
  }
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      DataOf(*state_, inode).Export(inode.size);
  JournalScope::Inode(ino);  // the file may have moved into blocks of its own
  if (absl::IsUnimplemented(exported.status())) {
    return PosixError(EOPNOTSUPP, exported.status().message());
  }
  if (absl::IsInvalidArgument(exported.status())) {
    return PosixError(EINVAL, exported.status().message());
  }
  return exported;
}

absl::Status Filesystem::NoteMappedWrite(InodeNumber ino) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  absl::MutexLock lock(&inode.mu);
  if (!inode.is_regular()) return PosixError(EINVAL, "only regular files can be mapped");
  inode.mtime = inode.ctime = Now();
  JournalScope::Attributes(ino);
  return absl::OkStatus();
}

absl::Status Filesystem::Allocate(InodeNumber ino, int mode, uint64_t offset, uint64_t length,
                                  const Caller& caller) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
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
    CUDAFS_RETURN_IF_ERROR(AllocateLocked(*state_, inode, operation, keep_size, offset, length));
    set_id_dropped = DropSetIdOnWrite(inode, caller);
    JournalScope::Inode(ino);
  }
  if (set_id_dropped) state_->AttributesChanged(ino);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Filesystem::Seek(InodeNumber ino, uint64_t offset, int whence) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  absl::ReaderMutexLock lock(&inode.mu);
  if (!inode.is_regular()) return PosixError(EINVAL);
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return PosixError(EINVAL);
  if (offset >= inode.size) return PosixError(ENXIO);
  if (whence == SEEK_HOLE) {
    return inode.data() ? std::min(inode.data()->NextHole(offset), inode.size) : offset;
  }
  std::optional<uint64_t> data = inode.data() ? inode.data()->NextData(offset) : std::nullopt;
  if (!data || *data >= inode.size) return PosixError(ENXIO);
  return *data;
}

// Large copies run on the device, extent to extent; small ones through the
// write-back cache (CachedFile::CopyFrom).
absl::StatusOr<size_t> Filesystem::CopyFileRange(InodeNumber in, uint64_t in_offset,
                                                 InodeNumber out, uint64_t out_offset,
                                                 size_t length, const Caller& caller) {
  JournalScope journal(*state_);
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> source, state_->Get(in));
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> target, state_->Get(out));
  Inode& from = *source;
  Inode& to = *target;
  if (from.is_directory() || to.is_directory()) return PosixError(EISDIR);
  if (!from.is_regular() || !to.is_regular()) return PosixError(EINVAL);
  if (&from == &to && in_offset < out_offset + length && out_offset < in_offset + length) {
    return PosixError(EINVAL);
  }
  // Two inodes lock in number order, like rename; one locks once.
  std::vector<Inode*> involved = {&from, &to};
  if (&from == &to) involved.pop_back();
  std::sort(involved.begin(), involved.end(), [](Inode* a, Inode* b) { return a->ino < b->ino; });
  LockAll(involved);
  bool set_id_dropped = false;
  bool source_accessed = false;
  absl::StatusOr<size_t> copied = CopyLocked(*state_, from, in_offset, to, out_offset, length,
                                             caller, &set_id_dropped, &source_accessed);
  UnlockAll(involved);
  JournalScope::Inode(in);
  JournalScope::Inode(out);
  if (set_id_dropped) state_->AttributesChanged(out);
  // The kernel refreshes the target's attributes after a copy, not the
  // source's, whose atime the copy may have moved.
  if (source_accessed && in != out) state_->AttributesChanged(in);
  return copied;
}

}  // namespace cudafs
