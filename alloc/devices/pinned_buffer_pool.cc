#include "alloc/devices/pinned_buffer_pool.h"

#include <utility>

namespace cudafs {

PinnedBufferPool::PinnedBufferPool(Device* device, size_t buffer_size)
    : device_(device), buffer_size_(buffer_size) {}

char* PinnedBufferPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      char* buffer = idle_.back();
      idle_.pop_back();
      return buffer;
    }
  }
  PinnedBuffer fresh(device_, buffer_size_);
  char* buffer = fresh.data();
  if (buffer == nullptr) return nullptr;
  absl::MutexLock lock(&mu_);
  buffers_.push_back(std::move(fresh));
  return buffer;
}

void PinnedBufferPool::Release(char* buffer) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(buffer);
}

}  // namespace cudafs
