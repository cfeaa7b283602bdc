// The FUSE low-level operations table. Each operation turns a request into
// one Filesystem call and its result into one reply; no filesystem logic
// lives here. What the glue holds is fuse_context.h's. The table and INIT
// are in fuse_ops.cc, the handlers by concern in fuse_dir_ops.cc,
// fuse_file_ops.cc, fuse_attr_ops.cc and fuse_xattr_ops.cc
// (fuse_handlers.h lists them).
#ifndef CUDAFS_FS_FUSE_FUSE_OPS_H_
#define CUDAFS_FS_FUSE_FUSE_OPS_H_

#include "fs/fuse/libfuse.h"

namespace cudafs {

const fuse_lowlevel_ops& FuseOperations();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_OPS_H_
