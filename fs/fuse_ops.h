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
  // Files opened with FOPEN_DIRECT_IO: every read and write is one request
  // straight to us, in up to 1 MiB pieces, and no page of file data is kept
  // in host RAM. Without it the kernel's page cache serves re-reads and
  // mmap, at the cost of smaller, serialised writes. The kernel refuses
  // shared writable mmap of direct_io files (ENODEV).
  bool direct_io = false;
};

const fuse_lowlevel_ops& FuseOperations();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_OPS_H_
