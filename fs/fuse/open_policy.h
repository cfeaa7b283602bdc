// The constants of how an open is served (see FuseContext::direct_io_min
// and ChooseDirectIo in fuse_ops.cc), apart from fuse_ops.h so that the
// option parser names them without depending on libfuse.
#ifndef CUDAFS_FS_FUSE_OPEN_POLICY_H_
#define CUDAFS_FS_FUSE_OPEN_POLICY_H_

#include <cstdint>
#include <limits>

namespace cudafs {

// How long the kernel may keep names and attributes: a day (see
// FuseContext::attr_timeout).
inline constexpr double kKernelCacheSeconds = 24 * 3600;
// The default of the direct_io_min= option: files of at least 1 MiB when
// opened get direct I/O.
inline constexpr uint64_t kDefaultDirectIoMin = uint64_t{1} << 20;
// The direct_io_min that no file reaches: nodirect_io.
inline constexpr uint64_t kNeverDirectIo = std::numeric_limits<uint64_t>::max();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_OPEN_POLICY_H_
