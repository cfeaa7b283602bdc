#include "fs/fuse/uring_buffers.h"

namespace cudafs {

void UringBuffers::UnregisterAll() {
  absl::MutexLock lock(&mu_);
  for (void* buffer : registered_) device_->UnregisterHostMemory(buffer);
  registered_.clear();
  closed_ = true;
}

void UringBuffers::Prepare(void* buffer, size_t length) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (registered_.contains(buffer)) return;
  }
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  // Another ring thread cannot hold the same buffer, but a buffer is
  // registered once even if that changes.
  if (!registered_.insert(buffer).second) return;
  device_->RegisterHostMemory(buffer, length);
}

}  // namespace cudafs
