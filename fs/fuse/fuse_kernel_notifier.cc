#include "fs/fuse/fuse_kernel_notifier.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "alloc/base/log.h"

namespace cudafs {

void FuseKernelNotifier::AttributesChanged(InodeNumber ino) {
  // Attributes only: that never waits on the page cache, so it is safe
  // even from inside the request that made the change.
  Invalidate(ino, -1, "attributes");
}

void FuseKernelNotifier::DataChanged(InodeNumber ino) { Invalidate(ino, 0, "pages"); }

void FuseKernelNotifier::Invalidate(InodeNumber ino, off_t offset, const char* what) {
  absl::ReaderMutexLock lock(&mu_);
  if (session_ == nullptr) return;
  const int result = fuse_lowlevel_notify_inval_inode(session_, ino, offset, 0);
  // ENOENT: the kernel holds no such inode, so nothing stale either.
  if (result != 0 && result != -ENOENT) {
    LogError(absl::StrFormat("cannot invalidate the kernel's %s of inode %d: %s", what, ino,
                             std::strerror(-result)));
  }
}

}  // namespace cudafs
