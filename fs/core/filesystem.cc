// Locking overview. There is no filesystem-wide lock on the data path.
//
//  1. FilesystemState::namespace_mu guards every Directory, its parent
//     included: lookups and readdir share it, operations that change names
//     (create, link, unlink, rename, ...) hold it exclusively. Read, write,
//     setattr and xattr operations never take it.
//  2. Inode::mu guards one inode's attributes, xattrs and data. Data reads
//     share it, so readers of one file run in parallel; writers of one file
//     serialise (as the kernel serialises them for one file anyway). Only
//     namespace operations, which hold (1) exclusively, lock several inodes.
//  3. InodeTable's lock guards the inode map and lookup/open counts.
//  4. The PageCache's shard locks each guard a share of the cached pages
//     (see cache/page_cache.h); one at a time, held for memory copies only.
//  5. Arena's lock guards the buddy allocator and the granules' use counts;
//     committing a granule and device copies run outside every lock but the
//     inode's.
//  6. A metadata log's (metadata_log.h), where the mount keeps one: each
//     append takes it for a copy, holding none of the above (an
//     operation's transaction is appended once it holds no lock:
//     fs/core/journal_scope.h).
// Locks are taken in this order only. The flusher thread takes one inode's
// lock at a time, holding none.
#include "fs/core/filesystem.h"

#include "alloc/base/status_macros.h"
#include "fs/core/filesystem_state.h"

namespace cudafs {

Filesystem::Filesystem(Arena* arena, FilesystemConfig config)
    : state_(std::make_unique<FilesystemState>(arena, config)) {}

Filesystem::~Filesystem() = default;

absl::Status Filesystem::Fsync(InodeNumber ino) {
  CUDAFS_RETURN_IF_ERROR(state_->Get(ino).status());
  return state_->FlushFile(ino);
}

PageCacheStats Filesystem::CacheStats() const { return state_->cache.Stats(); }

}  // namespace cudafs
