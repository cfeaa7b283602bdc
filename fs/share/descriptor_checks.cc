#include "fs/share/descriptor_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/file_pages.h"

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_WRITE
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

namespace cudafs {
namespace {

// The NVIDIA driver's character devices (/dev/nvidia*).
constexpr unsigned kNvidiaMajor = 195;

// The attributes the kernel has of `fd`, never asking a FUSE server
// (AT_STATX_DONT_SYNC: its cached attributes).
absl::StatusOr<struct statx> CachedAttributes(int fd) {
  struct statx attributes = {};
  if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO | STATX_SIZE |
                                                            STATX_BLOCKS,
            &attributes) != 0) {
    return PosixError(errno, "statx of the descriptor");
  }
  return attributes;
}

// What /proc says the descriptor is ("anon_inode:[...]", a path), without
// asking its filesystem.
std::string LinkOf(int fd) {
  char target[256];
  const ssize_t length =
      readlink(absl::StrFormat("/proc/self/fd/%d", fd).c_str(), target, sizeof target - 1);
  return length > 0 ? std::string(target, static_cast<size_t>(length)) : std::string();
}

bool IsShmem(int fd) { return fcntl(fd, F_GET_SEALS) >= 0; }

bool IsDriverDescriptor(int fd, const struct statx& attributes) {
  if (S_ISCHR(attributes.stx_mode)) return attributes.stx_rdev_major == kNvidiaMajor;
  return absl::StartsWith(LinkOf(fd), "anon_inode:");
}

}  // namespace

absl::StatusOr<InodeNumber> CheckFileDescriptor(int fd, bool writable, dev_t mount_device) {
  if (fd < 0) return PosixError(EBADF, "no descriptor came with the request");
  const int status_flags = fcntl(fd, F_GETFL);
  if (status_flags < 0) return PosixError(EBADF, "the descriptor is not open");
  if (status_flags & O_PATH) return PosixError(EBADF, "an O_PATH descriptor grants no access");
  const int access = status_flags & O_ACCMODE;
  if (writable && access != O_RDWR) {
    return PosixError(EACCES, "a writable mapping needs a descriptor open for reading and "
                              "writing");
  }
  if (!writable && access == O_WRONLY) {
    return PosixError(EBADF, "a copy needs a descriptor open for reading");
  }
  absl::StatusOr<struct statx> attributes = CachedAttributes(fd);
  if (!attributes.ok()) return attributes.status();
  if (makedev(attributes->stx_dev_major, attributes->stx_dev_minor) != mount_device) {
    return PosixError(EXDEV, "the descriptor is not of a file on this mount");
  }
  if (S_ISDIR(attributes->stx_mode)) return PosixError(EISDIR, "a directory cannot be mapped");
  if (!S_ISREG(attributes->stx_mode)) return PosixError(EINVAL, "only regular files can be mapped");
  return static_cast<InodeNumber>(attributes->stx_ino);
}

absl::Status CheckMemoryDescriptor(int fd, ShareMemoryKind kind, uint64_t bytes) {
  if (fd < 0) return PosixError(EBADF, "no memory came with the request");
  if (fcntl(fd, F_GETFL) < 0) return PosixError(EBADF, "the memory's descriptor is not open");
  absl::StatusOr<struct statx> attributes = CachedAttributes(fd);
  if (!attributes.ok()) return attributes.status();
  if (kind == kShareCuda) {
    if (!IsDriverDescriptor(fd, *attributes)) {
      return PosixError(EINVAL, "the memory is not a CUDA allocation's descriptor");
    }
    return absl::OkStatus();
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return PosixError(EINVAL, "the memory is not a memfd");
  if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
    return PosixError(EPERM, "the memory is sealed against writing");
  }
  if ((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY) {
    return PosixError(EBADF, "the memory's descriptor is not open for writing");
  }
  if (attributes->stx_size < bytes) {
    return PosixError(EINVAL, absl::StrFormat("the memory holds %d bytes, the copy needs %d",
                                              attributes->stx_size, bytes));
  }
  // The copy is the caller's memory, as a read(2) into its own buffer:
  // pages the daemon would allocate by writing would be charged to it. A
  // count of blocks says nothing of where they lie: every page the copy
  // fills must be there.
  return CheckPagesAllocated(fd, 0, bytes);
}

absl::Status CheckExpectedKind(int fd, dev_t mount_device) {
  absl::StatusOr<struct statx> attributes = CachedAttributes(fd);
  if (!attributes.ok()) return attributes.status();
  if (makedev(attributes->stx_dev_major, attributes->stx_dev_minor) == mount_device ||
      IsShmem(fd) || IsDriverDescriptor(fd, *attributes)) {
    return absl::OkStatus();
  }
  if (S_ISREG(attributes->stx_mode) || S_ISDIR(attributes->stx_mode)) {
    return PosixError(EXDEV, "the descriptor is not of a file on this mount");
  }
  return PosixError(EBADF, "a descriptor the share service never takes came with the request "
                           "(only files of the mount, memfds and CUDA allocations)");
}

bool ClosesAtOnce(int fd) {
  absl::StatusOr<struct statx> attributes = CachedAttributes(fd);
  if (!attributes.ok()) return true;  // not open: nothing to wait for
  return IsShmem(fd) || IsDriverDescriptor(fd, *attributes);
}

}  // namespace cudafs
