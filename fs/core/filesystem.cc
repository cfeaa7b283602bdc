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
// Locks are taken in this order only. The flusher thread takes one inode's
// lock at a time, holding none.
#include "fs/core/filesystem.h"

#include "cache/write_back_flusher.h"
#include "fs/core/filesystem_state.h"

namespace cudafs {

// Owns the page cache, the state whose files use it, and the thread that
// writes the cache back.
class Filesystem::Impl {
 public:
  Impl(Arena* arena, const FilesystemConfig& config)
      : cache_(&arena->device(), config.cache_bytes), state_(arena, config, &cache_) {}

  // Flushes the dirty pages of `ino` (fsync); a file that is gone has none.
  absl::Status FlushFile(InodeNumber ino) {
    std::shared_ptr<Inode> inode = state_.table.Get(ino);
    if (!inode || !inode->is_regular()) return absl::OkStatus();
    absl::MutexLock lock(&inode->mu);
    return inode->data() ? inode->data()->Flush() : absl::OkStatus();
  }

  PageCacheStats CacheStats() const { return cache_.Stats(); }
  FilesystemState& state() { return state_; }

 private:
  // Before state_, whose inode table holds the files: they give their pages
  // back when destroyed.
  PageCache cache_;
  FilesystemState state_;
  // Last, so destroyed first: it drains the cache while the files exist.
  WriteBackFlusher flusher_{&cache_, [this](uint64_t ino) { return FlushFile(ino); }};
};

Filesystem::Filesystem(Arena* arena, FilesystemConfig config)
    : impl_(std::make_unique<Impl>(arena, config)), state_(&impl_->state()), arena_(arena) {}

Filesystem::~Filesystem() = default;

absl::Status Filesystem::Fsync(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  return impl_->FlushFile(ino);
}

PageCacheStats Filesystem::CacheStats() const { return impl_->CacheStats(); }

}  // namespace cudafs
