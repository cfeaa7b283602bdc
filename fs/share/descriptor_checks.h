// Checks of descriptors that other users send the share service. None of
// them can block: an fstat(2) or close(2) of a file of another FUSE
// filesystem waits for that filesystem's server, which may never answer.
#ifndef CUDAFS_FS_SHARE_DESCRIPTOR_CHECKS_H_
#define CUDAFS_FS_SHARE_DESCRIPTOR_CHECKS_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "fs/core/filesystem.h"
#include "fs/wire/share_protocol.h"

namespace cudafs {

// The inode of the regular file of the mount with device `mount_device`
// that `fd` is open on: open for reading, and for writing too when
// `writable` (no O_PATH).
absl::StatusOr<InodeNumber> CheckFileDescriptor(int fd, bool writable, dev_t mount_device);

// That `fd` is memory of `kind` a private copy can go into: for host
// memory a memfd (or other shmem file) of at least `bytes`, its pages
// allocated by the sender and writable; for CUDA, a descriptor the driver
// made (the driver itself checks the rest when it imports it).
absl::Status CheckMemoryDescriptor(int fd, ShareMemoryKind kind, uint64_t bytes);

// Whether `fd` is of a kind some request takes: a file of the mount with
// device `mount_device`, shmem, or a descriptor the GPU driver made;
// EXDEV for a file or directory of another filesystem, EBADF for any
// other (a socket, a pipe, a device), refused as it comes.
absl::Status CheckExpectedKind(int fd, dev_t mount_device);

// Whether close(2) of `fd` returns at once: shmem, or a descriptor the GPU
// driver made. Others may wait: a file of another FUSE filesystem on its
// server, a socket on its linger time, even a file of the mount on this
// daemon's own FUSE session (for ever once it stops serving).
bool ClosesAtOnce(int fd);

}  // namespace cudafs

#endif  // CUDAFS_FS_SHARE_DESCRIPTOR_CHECKS_H_
