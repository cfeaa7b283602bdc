// PinnedBufferPool: host buffers of one size from one device, lent to many
// threads for a moment each (a read fill of the page cache) and kept for
// the next taker when given back. Pinning memory costs far more than the
// copy such a buffer serves (the driver maps and locks its pages), so it is
// paid once per buffer, not once per use.
//
// The pool holds as many buffers as were ever lent at once, and frees them
// when it is destroyed. Thread-safe.
#ifndef CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_POOL_H_
#define CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_POOL_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device.h"
#include "alloc/devices/pinned_buffer.h"

namespace cudafs {

class PinnedBufferPool {
 public:
  // Buffers of `buffer_size` bytes from `device`, which must outlive the
  // pool. None is made before the first Acquire.
  PinnedBufferPool(Device* device, size_t buffer_size);
  PinnedBufferPool(const PinnedBufferPool&) = delete;
  PinnedBufferPool& operator=(const PinnedBufferPool&) = delete;

  // A buffer of buffer_size bytes, for the caller alone until it gives it
  // back with Release: an idle one, else a new one (made without holding
  // the lock, as the device may take long). Null when none is idle and the
  // device has no memory for another.
  char* Acquire();
  // Gives back a buffer from Acquire. Every buffer must be given back
  // before the pool is destroyed.
  void Release(char* buffer);

 private:
  Device* const device_;
  const size_t buffer_size_;
  absl::Mutex mu_;
  std::vector<PinnedBuffer> buffers_ ABSL_GUARDED_BY(mu_);  // every one made, lent or idle
  std::vector<char*> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_POOL_H_
