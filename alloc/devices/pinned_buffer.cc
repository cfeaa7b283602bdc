#include "alloc/devices/pinned_buffer.h"

#include <utility>

namespace cudafs {

PinnedBuffer::PinnedBuffer(Device* device, size_t size)
    : data_(static_cast<char*>(device->AllocateHostBuffer(size))) {
  if (data_ != nullptr) {
    device_ = device;
    size_ = size;
  }
}

PinnedBuffer::~PinnedBuffer() { Free(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PinnedBuffer::Free() {
  if (data_ != nullptr) device_->FreeHostBuffer(data_, size_);
  device_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace cudafs
