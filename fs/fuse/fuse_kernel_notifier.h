// FuseKernelNotifier: the KernelNotifier of a FUSE mount, as notifications
// on its session (fuse_lowlevel_notify_*). Before the session is attached
// (nothing is cached before the mount) and after it is detached, each call
// does nothing. Thread-safe.
#ifndef CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_
#define CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_

#include <sys/types.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fs/core/kernel_notifier.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {

class FuseKernelNotifier final : public KernelNotifier {
 public:
  // The mounted session, or null once it is no longer served; it must
  // outlive its attachment. Returns once no call uses the session attached
  // before, so that it may be destroyed then (a periodic task may be
  // notifying while the mount ends).
  void Attach(fuse_session* session) {
    absl::MutexLock lock(&mu_);
    session_ = session;
  }

  // Drops the kernel's cached attributes of `ino` (notify_inval_inode,
  // attributes only).
  void AttributesChanged(InodeNumber ino) override;
  // Drops the kernel's cached attributes and pages of `ino`.
  void DataChanged(InodeNumber ino) override;

 private:
  // `offset` -1: attributes only; 0: attributes and every cached page.
  void Invalidate(InodeNumber ino, off_t offset, const char* what);

  absl::Mutex mu_;
  fuse_session* session_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_KERNEL_NOTIFIER_H_
