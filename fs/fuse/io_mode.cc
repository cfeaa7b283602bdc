#include "fs/fuse/io_mode.h"

#include <fcntl.h>

namespace cudafs {
namespace {

// The handle (fh) of an open with direct I/O; the others are 0.
constexpr uint64_t kDirectIoOpen = 1;

}  // namespace

bool ChooseDirectIo(const Negotiated& negotiated, int flags, std::optional<uint64_t> size_at_open) {
  if (negotiated.direct_io_min == kNeverDirectIo) return false;
  return (flags & O_DIRECT) || !size_at_open || *size_at_open >= negotiated.direct_io_min;
}

void SetCaching(bool direct_io, fuse_file_info* fi) {
  if (direct_io) {
    fi->direct_io = 1;
    fi->fh = kDirectIoOpen;
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
    // Writers at different offsets of one file need not queue in the
    // kernel: the inode lock in the core orders what must be ordered.
    fi->parallel_direct_writes = 1;
#endif
    return;
  }
  // Data changes only through this connection, which keeps the kernel's
  // page cache coherent (direct-I/O writes to the same file included), so
  // cached pages may outlive an open.
  fi->keep_cache = 1;
}

bool IsDirectIoOpen(const fuse_file_info* fi) { return fi->fh == kDirectIoOpen; }

bool MarksAccessAtOpen(int flags, bool direct_io) {
  const bool reads = (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC);
  return !direct_io && reads && !(flags & O_NOATIME);
}

bool KernelKills(const fuse_file_info* fi) {
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
  return fi->kill_suidgid;
#else
  (void)fi;
  return false;
#endif
}

}  // namespace cudafs
