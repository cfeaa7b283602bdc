// The FUSE low-level operations table. Each operation turns a request into
// one Filesystem call and its result into one reply; no filesystem logic
// lives here.
#ifndef CUDAFS_FS_FUSE_OPS_H_
#define CUDAFS_FS_FUSE_OPS_H_

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#include <fuse_lowlevel.h>

#include "fs/filesystem.h"

namespace cudafs {

// The session's userdata.
struct FuseContext {
  Filesystem* filesystem;
  // How long the kernel may cache names and attributes. Every change goes
  // through this kernel's FUSE connection, which updates or invalidates its
  // cache itself, so only what the filesystem changes on its own (atime on
  // read) is seen late, by at most this long.
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
};

const fuse_lowlevel_ops& FuseOperations();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_OPS_H_
