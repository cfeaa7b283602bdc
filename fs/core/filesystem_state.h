// FilesystemState: what every operation of the Filesystem works on (the
// inode table, the namespace lock, the arena, the configuration, the page
// cache and its write-back thread), and the helpers on inodes that
// operations in several files share. Private to fs/core: nothing outside it
// includes this header.
//
// One place per operation: each public Filesystem method holds its whole
// operation, in the file of its concept (namespace_ops.cc, file_data_ops.cc,
// xattrs.cc, attributes.cc); a helper that one file alone needs is a free
// function there, one that several need is here. No method forwards to
// another class: Fsync is in filesystem.cc because its work is the
// write-back's FlushFile, which the flusher thread shares.
#ifndef CUDAFS_FS_CORE_FILESYSTEM_STATE_H_
#define CUDAFS_FS_CORE_FILESYSTEM_STATE_H_

#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/extent_map.h"
#include "cache/cached_file.h"
#include "cache/page_cache.h"
#include "cache/write_back_flusher.h"
#include "fs/core/filesystem.h"
#include "fs/core/inode.h"
#include "fs/core/inode_table.h"
#include "fs/core/permissions.h"

namespace cudafs {

inline constexpr size_t kNameMax = 255;
inline constexpr uint64_t kMaxFileSize = std::numeric_limits<int64_t>::max();

struct FilesystemState {
  // Makes the root directory and starts the write-back. `arena` must
  // outlive the state.
  FilesystemState(Arena* arena, const FilesystemConfig& config);

  FilesystemState(const FilesystemState&) = delete;
  FilesystemState& operator=(const FilesystemState&) = delete;

  absl::StatusOr<std::shared_ptr<Inode>> Get(InodeNumber ino) const;
  // The directory `ino`, still linked into the tree.
  absl::StatusOr<std::shared_ptr<Inode>> GetDirectory(InodeNumber ino) const;

  // Sets the atime to now where relatime (or strictatime) says a read
  // should, unless the mount is noatime. True when it moved.
  bool TouchAtime(Inode& inode);
  // Gives back what growth reserved past the end of regular file `inode`
  // (ExtentMap::TrimTail) and tells whoever caches its attributes. True
  // when there was some: its extents changed.
  bool TrimGrowth(Inode& inode);
  // Notes that a write left growth slack in `ino`, for TrimIdleGrowth
  // (only under FilesystemConfig::trim_growth_when_idle). Call with no lock
  // held.
  void NoteGrowth(InodeNumber ino);
  // Tells whoever caches attributes that those of `ino` changed (see
  // FilesystemConfig::notifier). Call with no lock held.
  void AttributesChanged(InodeNumber ino) const;
  // Writes back the dirty pages of `ino` (fsync, and the flusher's work); a
  // file that is gone has none.
  absl::Status FlushFile(InodeNumber ino);

  // Tell the analysis that Inode::namespace_lock is this namespace_mu,
  // which is true of every inode of `table`, so that the namespace fields of
  // inodes may be read, or changed. Checked: that the lock is held.
  void ReadsNamespace() const ABSL_SHARED_LOCKS_REQUIRED(namespace_mu)
      ABSL_ASSERT_SHARED_LOCK(Inode::namespace_lock);
  void WritesNamespace() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(namespace_mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(Inode::namespace_lock);

  Arena* const arena;
  const FilesystemConfig config;
  // Before the inodes, whose files give their pages back when destroyed.
  PageCache cache;
  // What regular files' data share, and long symlink targets' (in blocks of
  // min_block: a target takes one).
  const CachedFile::Space file_space;
  const ExtentMap::Space symlink_space;
  // Guards every Directory (see the overview in filesystem.cc).
  mutable absl::Mutex namespace_mu;
  InodeTable table;
  // Files with growth slack waiting for TrimIdleGrowth, by when the write
  // that left it was made. Taken with no other lock held.
  absl::Mutex growing_mu;
  absl::flat_hash_map<InodeNumber, absl::Time> growing ABSL_GUARDED_BY(growing_mu);
  // Whether the metadata log's owner was asked for a checkpoint
  // (journal_scope.h) since the last one.
  std::atomic<bool> checkpoint_asked{false};
  // The exchanges a dead predecessor's log says were done (LoadLog), by
  // request: resent, they must not swap back (Filesystem::ExchangeDone).
  absl::Mutex done_mu;
  absl::flat_hash_set<uint64_t> exchanges_done ABSL_GUARDED_BY(done_mu);
  // Last, so destroyed first: it drains the cache while the files exist.
  WriteBackFlusher flusher;
};

timespec Now();

void FillStat(const Inode& inode, struct stat* st) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);

// relatime, the Linux default: true when a read at `now` moves the atime.
bool NeedsAtimeUpdate(const Inode& inode, const timespec& now) ABSL_SHARED_LOCKS_REQUIRED(inode.mu);

// Applies ModeAfterDataChange (permissions.h) to `inode`, changed by
// `caller`. True when the mode changed.
bool DropSetIdOnWrite(Inode& inode, const Caller& caller) ABSL_EXCLUSIVE_LOCKS_REQUIRED(inode.mu);

// Lock and unlock a set of inodes sorted by number, for rename and copies.
// A set that varies at run time is beyond the static lock analysis.
void LockAll(const std::vector<Inode*>& inodes);
void UnlockAll(const std::vector<Inode*>& inodes);

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_FILESYSTEM_STATE_H_
