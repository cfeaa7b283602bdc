// UringBuffers: lets the device register libfuse's io_uring request buffers.
//
// Over io_uring the kernel copies each request's payload into a buffer that
// libfuse allocated for one ring entry, and takes the reply from the same
// buffer. Those buffers live as long as the session, so registering each
// with the device once (cuMemHostRegister on a GPU) lets write payloads go
// to VRAM and read data come back from it with one DMA and no copy through
// a staging buffer. libfuse does not list its buffers, so they are
// registered the first time a request shows one.
#ifndef CUDAFS_FS_FUSE_URING_BUFFERS_H_
#define CUDAFS_FS_FUSE_URING_BUFFERS_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device.h"

namespace cudafs {

class UringBuffers {
 public:
  explicit UringBuffers(Device* device) : device_(device) {}
  UringBuffers(const UringBuffers&) = delete;
  UringBuffers& operator=(const UringBuffers&) = delete;
  ~UringBuffers() { UnregisterAll(); }

  // Registers `buffer` (of `length` bytes) with the device unless it
  // already is, or UnregisterAll has run. Thread-safe; after the first call
  // per buffer it only takes a shared lock.
  void Prepare(void* buffer, size_t length);

  // Unregisters every buffer, for good. Must run before libfuse frees them,
  // i.e. before fuse_session_destroy; a ring thread still finishing a
  // request afterwards gets no new registration.
  void UnregisterAll();

 private:
  Device* const device_;
  absl::Mutex mu_;
  absl::flat_hash_set<void*> registered_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_URING_BUFFERS_H_
