// libfuse's low-level API, at the version the glue is written against: every
// file of the glue includes it through here.
#ifndef CUDAFS_FS_FUSE_LIBFUSE_H_
#define CUDAFS_FS_FUSE_LIBFUSE_H_

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#include <fuse_lowlevel.h>

#endif  // CUDAFS_FS_FUSE_LIBFUSE_H_
