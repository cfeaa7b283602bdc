// FuseKernelNotifier: the KernelNotifier of a FUSE mount, as notifications
// on its session (fuse_lowlevel_notify_*). Before the session is attached
// (nothing is cached before the mount) and after it is detached, each call
// does nothing.
#ifndef CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_
#define CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_

#include <sys/types.h>

#include <atomic>

#include "fs/core/kernel_notifier.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {

class FuseKernelNotifier final : public KernelNotifier {
 public:
  // The mounted session, or null once it is no longer served; it must
  // outlive its attachment.
  void Attach(fuse_session* session) { session_ = session; }

  // Drops the kernel's cached attributes of `ino` (notify_inval_inode,
  // attributes only).
  void AttributesChanged(InodeNumber ino) override;
  // Drops the kernel's cached attributes and pages of `ino`.
  void DataChanged(InodeNumber ino) override;

 private:
  // `offset` -1: attributes only; 0: attributes and every cached page.
  void Invalidate(InodeNumber ino, off_t offset, const char* what);

  std::atomic<fuse_session*> session_{nullptr};
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_
