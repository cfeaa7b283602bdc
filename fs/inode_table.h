// InodeTable: inode number -> Inode, and the reference counts that decide
// when an inode goes away.
//
// An inode is dropped (and its data blocks returned to the arena) once it
// has no name, no kernel lookup reference and no open handle. Inode numbers
// count up from 2 and are never reused (FUSE generation stays 0).
//
// Lock order: Inode::mu before the table's lock; never call a method here
// while holding an Inode::mu, except those that say so.
#ifndef CUDAFS_FS_INODE_TABLE_H_
#define CUDAFS_FS_INODE_TABLE_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fs/inode.h"

namespace cudafs {

class InodeTable {
 public:
  // max_inodes counts every inode including the root; 0 is unlimited.
  explicit InodeTable(uint64_t max_inodes);

  // Inserts the root directory (inode 1).
  std::shared_ptr<Inode> CreateRoot(mode_t mode);
  // A new inode; ResourceExhausted (ENOSPC) when max_inodes are in use.
  absl::StatusOr<std::shared_ptr<Inode>> Create(mode_t mode);
  // nullptr when no such inode exists (any more).
  std::shared_ptr<Inode> Get(uint64_t ino) const;

  // May be called with inode.mu held.
  void AddLookup(Inode& inode, uint64_t count = 1);
  void AddOpen(Inode& inode);
  // Drop references, then drop the inode if nothing holds it. The caller
  // must not hold inode.mu.
  void Forget(const std::shared_ptr<Inode>& inode, uint64_t count);
  // Returns true when that was the inode's last open handle.
  bool Release(const std::shared_ptr<Inode>& inode);
  // Drops the inode if it has no name, lookup or open left (after unlink,
  // rmdir or rename replaced it). The caller must not hold inode.mu.
  void DropIfUnused(const std::shared_ptr<Inode>& inode);

  uint64_t size() const;
  uint64_t max_inodes() const { return max_inodes_; }

 private:
  const uint64_t max_inodes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Inode>> inodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ino_ ABSL_GUARDED_BY(mu_) = 2;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_INODE_TABLE_H_
