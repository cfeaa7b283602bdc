// Inode: one file, directory, symlink or special file of the filesystem.
//
// Locking (see the overview in fs/core/filesystem.cc):
//  - `mu` guards the attributes, the extended attributes and the file data;
//  - a directory's Directory belongs to the namespace and is guarded by the
//    Filesystem's namespace lock, which the analysis knows as
//    Inode::namespace_lock;
//  - `lookups` and `opens` are guarded by the InodeTable's lock, which the
//    analysis knows as Inode::table_lock.
// Both locks are shared by all inodes of a filesystem, and a pointer to
// each in every inode would cost 16 bytes a file only to name them. So the
// analysis names them by an empty role each, and whoever holds the real
// lock says so (FilesystemState::ReadsNamespace and WritesNamespace,
// InodeTable::Counts) before such a field is used.
//
// Small: with its shared_ptr control block an inode fills one 128-byte
// malloc chunk (docs/DESIGN.md, *Allocation*, says how).
#ifndef CUDAFS_FS_CORE_INODE_H_
#define CUDAFS_FS_CORE_INODE_H_

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cassert>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cache/cached_file.h"
#include "fs/core/directory.h"
#include "fs/core/symlink_target.h"

namespace cudafs {

// What the thread-safety analysis sees of a lock that every inode shares
// and none holds (see above). Empty; never locked itself.
class ABSL_LOCKABLE LockRole {};

// A timespec in 12 bytes rather than 16, 4-byte aligned so that three pack
// between the inode's 32-bit fields. Every second a timespec holds is kept;
// nanoseconds are below 10^9 (the kernel's utimensat checks, and FUSE
// carries them in 32 bits). Converts both ways implicitly: it is only how
// an inode stores a timespec.
class PackedTime {
 public:
  PackedTime() = default;
  PackedTime(const timespec& time)  // NOLINT(google-explicit-constructor)
      : seconds_low_(static_cast<uint32_t>(time.tv_sec)),
        seconds_high_(static_cast<uint32_t>(static_cast<uint64_t>(time.tv_sec) >> 32)),
        nanoseconds_(static_cast<uint32_t>(time.tv_nsec)) {}
  operator timespec() const {  // NOLINT(google-explicit-constructor)
    timespec time{};
    time.tv_sec = static_cast<time_t>(uint64_t{seconds_high_} << 32 | seconds_low_);
    time.tv_nsec = nanoseconds_;
    return time;
  }

 private:
  uint32_t seconds_low_ = 0;
  uint32_t seconds_high_ = 0;
  uint32_t nanoseconds_ = 0;
};

struct Inode {
  using Xattrs = absl::btree_map<std::string, std::string>;

  // The locks every inode shares (see the top of this file).
  static inline LockRole namespace_lock;
  static inline LockRole table_lock;

  // Makes the payload of `type` (S_IFMT bits): an empty Directory for a
  // directory, nothing yet for the others.
  Inode(uint64_t number, mode_t type);
  ~Inode();
  Inode(const Inode&) = delete;
  Inode& operator=(const Inode&) = delete;

  bool is_directory() const { return type == S_IFDIR; }
  bool is_regular() const { return type == S_IFREG; }
  bool is_symlink() const { return type == S_IFLNK; }
  bool is_device() const { return type == S_IFCHR || type == S_IFBLK; }

  const uint64_t ino;
  mutable absl::Mutex mu;
  uint64_t size ABSL_GUARDED_BY(mu) = 0;
  uint64_t lookups ABSL_GUARDED_BY(table_lock) = 0;  // FUSE counts in 64 bits
  PackedTime atime ABSL_GUARDED_BY(mu);
  PackedTime mtime ABSL_GUARDED_BY(mu);
  PackedTime ctime ABSL_GUARDED_BY(mu);
  // Modes fit 16 bits (S_IFMT is 0170000).
  const uint16_t type;                     // S_IFMT bits; never change
  uint16_t mode ABSL_GUARDED_BY(mu) = 0;   // type and permission bits
  uint32_t nlink ABSL_GUARDED_BY(mu) = 0;  // FUSE carries 32 bits
  uid_t uid ABSL_GUARDED_BY(mu) = 0;
  gid_t gid ABSL_GUARDED_BY(mu) = 0;
  uint32_t opens ABSL_GUARDED_BY(table_lock) = 0;

  // What only one type of inode has, behind accessors that say which lock
  // guards it (Clang's analysis cannot name `mu` from inside a union).
  //
  // Regular files: the file's bytes, null until the file first needs an
  // extent map (write, fallocate, either side of a copy); until then every
  // byte of it reads as a hole, and an empty file costs no CachedFile.
  CachedFile* data() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    assert(is_regular());
    return data_.get();
  }
  void set_data(std::unique_ptr<CachedFile> data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    assert(is_regular());
    data_ = std::move(data);
  }
  // Directories: made with the inode; its entries and parent belong to the
  // namespace.
  const Directory& directory() const ABSL_SHARED_LOCKS_REQUIRED(namespace_lock) {
    assert(is_directory());
    return *directory_;
  }
  Directory& mutable_directory() ABSL_EXCLUSIVE_LOCKS_REQUIRED(namespace_lock) {
    assert(is_directory());
    return *directory_;
  }
  // Symlinks: set before the inode has a name, never changed.
  const SymlinkTarget& symlink_target() const {
    assert(is_symlink());
    return *symlink_target_;
  }
  void set_symlink_target(std::unique_ptr<const SymlinkTarget> target) {
    assert(is_symlink());
    symlink_target_ = std::move(target);
  }
  // Character and block devices.
  dev_t rdev() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    assert(is_device());
    return rdev_;
  }
  void set_rdev(dev_t rdev) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    assert(is_device());
    rdev_ = rdev;
  }

  // Null while the inode has none, which is most of the time.
  std::unique_ptr<Xattrs> xattrs ABSL_GUARDED_BY(mu);

  // The inode space (InodeTable) its extended attributes take.
  uint64_t XattrSpace() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    uint64_t space = 0;
    if (xattrs) {
      for (const auto& [name, value] : *xattrs) space += XattrSpaceOf(name, value);
    }
    return space;
  }
  // What one attribute takes, counted like tmpfs' simple_xattr_space(): its
  // name, its value, and a map node and two strings' headers.
  static uint64_t XattrSpaceOf(absl::string_view name, absl::string_view value) {
    return 64 + name.size() + 1 + value.size();
  }

 private:
  // `type` says which member is live.
  union {
    std::unique_ptr<CachedFile> data_;
    std::unique_ptr<Directory> directory_;
    std::unique_ptr<const SymlinkTarget> symlink_target_;
    dev_t rdev_;
  };
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_INODE_H_
