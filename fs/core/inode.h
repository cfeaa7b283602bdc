// Inode: one file, directory, symlink or special file of the filesystem.
//
// Locking (see the overview in fs/core/filesystem.cc):
//  - `mu` guards the attributes, the extended attributes and the file data;
//  - `directory` and `parent` belong to the namespace and are guarded by the
//    Filesystem's namespace lock, which every inode names (`namespace_mu`);
//  - `lookups` and `opens` are guarded by the InodeTable's lock, which every
//    inode names too (`table_mu`).
// Both locks are shared by all inodes of a filesystem, so the analysis
// cannot tell that a lock held through the Filesystem or the InodeTable is
// the one an inode names: FilesystemState::ReadsNamespaceOf and
// WritesNamespaceOf, and InodeTable::CountsOf, say so (and check it) before
// such a field is used.
#ifndef CUDAFS_FS_CORE_INODE_H_
#define CUDAFS_FS_CORE_INODE_H_

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cache/cached_file.h"
#include "fs/core/directory.h"

namespace cudafs {

struct Inode {
  // `namespace_mu` and `table_mu`: see the locking above.
  Inode(uint64_t number, mode_t initial_mode, absl::Mutex* namespace_lock, absl::Mutex* table_lock)
      : ino(number),
        type(initial_mode & S_IFMT),
        namespace_mu(namespace_lock),
        table_mu(table_lock) {}

  bool is_directory() const { return type == S_IFDIR; }
  bool is_regular() const { return type == S_IFREG; }
  bool is_symlink() const { return type == S_IFLNK; }

  const uint64_t ino;
  const mode_t type;  // S_IFMT bits; never change
  absl::Mutex* const namespace_mu;
  absl::Mutex* const table_mu;

  mutable absl::Mutex mu;
  mode_t mode ABSL_GUARDED_BY(mu) = 0;  // type and permission bits
  nlink_t nlink ABSL_GUARDED_BY(mu) = 0;
  uid_t uid ABSL_GUARDED_BY(mu) = 0;
  gid_t gid ABSL_GUARDED_BY(mu) = 0;
  dev_t rdev ABSL_GUARDED_BY(mu) = 0;
  uint64_t size ABSL_GUARDED_BY(mu) = 0;
  timespec atime ABSL_GUARDED_BY(mu){};
  timespec mtime ABSL_GUARDED_BY(mu){};
  timespec ctime ABSL_GUARDED_BY(mu){};
  absl::btree_map<std::string, std::string> xattrs ABSL_GUARDED_BY(mu);
  // Regular files only, and only once the file first stores a byte (write,
  // fallocate, copy target): until then every byte of it reads as a hole,
  // and a million empty files cost no CachedFile.
  std::unique_ptr<CachedFile> data ABSL_GUARDED_BY(mu);
  std::string symlink_target;  // set before the inode is published

  // Namespace; directories only. Both are set when the directory is made,
  // under the namespace lock; `parent` changes when a rename moves the
  // directory, under the namespace lock held exclusively.
  std::unique_ptr<Directory> directory ABSL_GUARDED_BY(namespace_mu)
      ABSL_PT_GUARDED_BY(namespace_mu);
  uint64_t parent ABSL_GUARDED_BY(namespace_mu) = 0;

  // The inode space (InodeTable) its extended attributes take.
  uint64_t XattrSpace() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    uint64_t space = 0;
    for (const auto& [name, value] : xattrs) space += XattrSpaceOf(name, value);
    return space;
  }
  // What one attribute takes, counted like tmpfs' simple_xattr_space(): its
  // name, its value, and a map node and two strings' headers.
  static uint64_t XattrSpaceOf(absl::string_view name, absl::string_view value) {
    return 64 + name.size() + 1 + value.size();
  }

  // Lifetime counts.
  uint64_t lookups ABSL_GUARDED_BY(table_mu) = 0;
  uint64_t opens ABSL_GUARDED_BY(table_mu) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_INODE_H_
