// What cudafs asks of the kernel at FUSE init and at each open: cache
// lifetimes, the request size, the direct-I/O threshold (see
// Negotiated::direct_io_min and ChooseDirectIo in io_mode.h). Apart from
// fuse_context.h so that the option parser names them without libfuse.
#ifndef CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_
#define CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_

#include <cstdint>
#include <limits>

#include "alloc/base/sizes.h"

namespace cudafs {

// The largest read or write the kernel sends (the max_write and
// max_readahead asked for at FUSE init: the max_request=
// option), and so the least a buffer for one request's data holds. The
// kernel sends at most /proc/sys/fs/fuse/max_pages_limit pages per request
// (256 before kernel 6.13 and by default: 1 MiB); main raises that limit
// when it must and may (see RequestLimitRule in fs/daemon/host_probes.h).
inline constexpr uint64_t kDefaultMaxRequest = 4 * kMiB;
inline constexpr uint64_t kSmallestMaxRequest = 128 * kKiB;
// FUSE's max_pages is 16 bits; beyond this the buffers (one per worker
// and per io_uring entry) cost more than fewer requests gain.
inline constexpr uint64_t kLargestMaxRequest = 16 * kMiB;
// The kernel's limit when /proc/sys/fs/fuse/max_pages_limit is absent
// (FUSE_MAX_MAX_PAGES before 6.13).
inline constexpr uint64_t kCompiledMaxPages = 256;
// Host memory of io_uring request buffers per queue (one per CPU) that the
// default uring_depth= keeps to beyond depth 2: depth 4 up to 2 MiB
// requests, 2 from 4 MiB. (Depth 4 measured best for 4k random reads, 2
// second; see docs/DESIGN.md, "Data path".)
inline constexpr uint64_t kUringBytesPerQueue = 8 * kMiB;
inline constexpr uint32_t kLeastDefaultUringDepth = 2;
inline constexpr uint32_t kMostDefaultUringDepth = 4;

// How long the kernel may keep names and attributes: a day (see
// FuseSettings::attr_timeout).
inline constexpr double kKernelCacheSeconds = 24 * 3600;
// The default of the direct_io_min= option: files of at least 1 MiB when
// opened get direct I/O.
inline constexpr uint64_t kDefaultDirectIoMin = kMiB;
// The direct_io_min that no file reaches: nodirect_io.
inline constexpr uint64_t kNeverDirectIo = std::numeric_limits<uint64_t>::max();

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_KERNEL_SETTINGS_H_
