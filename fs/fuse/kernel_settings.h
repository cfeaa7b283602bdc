// What cudafs asks of the kernel at FUSE init and at each open: cache
// lifetimes, the request size, the direct-I/O threshold (see
// FuseContext::direct_io_min and ChooseDirectIo in fuse_ops.cc). Apart from
// fuse_ops.h so that the option parser names them without libfuse.
#ifndef CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_
#define CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_

#include <cstdint>
#include <limits>

#include "alloc/base/sizes.h"

namespace cudafs {

// The largest read or write the kernel sends (the max_write and
// max_readahead asked for at FUSE init), and so the least a buffer for one
// request's data holds.
inline constexpr uint64_t kMaxRequestBytes = kMiB;

// How long the kernel may keep names and attributes: a day (see
// FuseContext::attr_timeout).
inline constexpr double kKernelCacheSeconds = 24 * 3600;
// The default of the direct_io_min= option: files of at least 1 MiB when
// opened get direct I/O.
inline constexpr uint64_t kDefaultDirectIoMin = kMiB;
// The direct_io_min that no file reaches: nodirect_io.
inline constexpr uint64_t kNeverDirectIo = std::numeric_limits<uint64_t>::max();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_
