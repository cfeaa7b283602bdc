// PinnedBuffer: owns one buffer from Device::AllocateHostBuffer and gives it
// back (FreeHostBuffer) when destroyed or assigned over, so that no path
// leaks pinned memory or frees it to the wrong device.
//
// The memory is what the device chose: pinned on a GPU (its copies then run
// at full speed with no staging), page-aligned heap memory elsewhere.
//
// A value like std::unique_ptr: move-only, not safe to change from two
// threads at once.
#ifndef CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_H_
#define CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_H_

#include <cstddef>

#include "alloc/devices/device.h"

namespace cudafs {

class PinnedBuffer {
 public:
  // Holds nothing.
  PinnedBuffer() = default;
  // `size` bytes from `device`, which must outlive the buffer. Holds nothing
  // when the device has no memory for them.
  PinnedBuffer(Device* device, size_t size);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;

  // Null, 0 and null when it holds nothing.
  char* data() const { return data_; }
  size_t size() const { return size_; }
  Device* device() const { return device_; }

 private:
  // Gives the buffer back to its device; then it holds nothing.
  void Free();

  Device* device_ = nullptr;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_PINNED_BUFFER_H_
