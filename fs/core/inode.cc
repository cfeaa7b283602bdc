#include "fs/core/inode.h"

#include <new>

namespace cudafs {

// A million files are a million inodes: with the control block of
// make_shared (16 bytes), an inode fills one 128-byte malloc chunk.
static_assert(sizeof(Inode) <= 104, "an inode grew past its malloc chunk");

Inode::Inode(uint64_t number, mode_t file_type) : ino(number), type(file_type & S_IFMT) {
  switch (type) {
    case S_IFREG:
      new (&data_) std::unique_ptr<CachedFile>();
      break;
    case S_IFDIR:
      new (&directory_) std::unique_ptr<Directory>(std::make_unique<Directory>());
      break;
    case S_IFLNK:
      new (&symlink_target_) std::unique_ptr<const SymlinkTarget>();
      break;
    default:
      rdev_ = 0;
  }
}

Inode::~Inode() {
  switch (type) {
    case S_IFREG:
      data_.~unique_ptr();
      break;
    case S_IFDIR:
      directory_.~unique_ptr();
      break;
    case S_IFLNK:
      symlink_target_.~unique_ptr();
      break;
  }
}

}  // namespace cudafs
