// KernelNotifier: every call the daemon makes up into the kernel unasked.
// The kernel caches what requests told it (attributes for a day, file pages
// while memory lasts) and learns of every change made through FUSE; these
// calls drop what changed behind its back. The core calls AttributesChanged,
// the share service (fs/share) DataChanged; the FUSE implementation is
// FuseKernelNotifier (fs/fuse/fuse_kernel_notifier.h).
#ifndef CUDAFS_FS_CORE_KERNEL_NOTIFIER_H_
#define CUDAFS_FS_CORE_KERNEL_NOTIFIER_H_

#include "fs/core/filesystem.h"

namespace cudafs {

class KernelNotifier {
 public:
  virtual ~KernelNotifier() = default;

  // The attributes of `ino` changed where no reply carries them: set-id bits
  // dropped by a write, an O_TRUNC open, fallocate or a copy; the atime of a
  // copy's source or of Filesystem::MarkAccessed; blocks given back by
  // trimming growth. Never waits on the kernel's page cache, so it may be
  // called from inside a request; the core calls it with no lock held.
  virtual void AttributesChanged(InodeNumber ino) = 0;

  // The bytes of `ino` changed behind FUSE (a process wrote through a
  // shared mapping): its attributes and cached pages are stale. May wait on
  // the kernel's page locks: never from inside a request.
  virtual void DataChanged(InodeNumber ino) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_CORE_KERNEL_NOTIFIER_H_
