// PinnedHostRanges: host memory handed to one GPU's device (buffers it
// allocated, ranges registered with it), pinned while the GPU's context
// lives, so that copies from it run at PCIe speed and the scatter kernel
// reads it at its host address. The memory outlives the contexts: the page
// cache's frames live as long as the mount.
//
// Thread-safe. The device serialises Add and Remove against the context's
// life with its own lock, taken before this one.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_HOST_MEMORY_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "alloc/devices/device.h"

namespace cudafs {

class CudaContext;

class PinnedHostRanges {
 public:
  // `context` must outlive this.
  explicit PinnedHostRanges(const CudaContext& context) : context_(context) {}
  // Unmaps the buffers it allocated.
  ~PinnedHostRanges();

  // Plain memory, pinned now when `pin` (the context held and current).
  // Null when the memory cannot be had.
  void* Allocate(size_t length, bool pin);
  // A caller's range, pinned now when `pin`.
  void Register(void* memory, size_t length, bool pin);
  // Unpins (the context current) and forgets a range; unmaps it when it
  // was allocated here.
  void Remove(void* memory);

  struct Pinned {
    int ranges = 0;
    size_t bytes = 0;
  };
  // Pins every range. REQUIRES: the context current.
  Pinned PinAll();
  // Unpins every range. REQUIRES: the context current.
  void UnpinAll();

  // Every source of `copies` lies in memory this device pinned.
  bool AllPinned(absl::Span<const HostToDevice> copies) const;

 private:
  struct Range {
    size_t length = 0;
    bool owned = false;   // ours (Allocate): unmapped on Remove
    bool pinned = false;  // under the current context
  };
  // Pins a range under the current context; false when the driver declines
  // (copies from it then go through the driver's staging).
  bool Pin(void* memory, size_t length) const;

  const CudaContext& context_;
  mutable absl::Mutex mu_;
  // Start of each range -> what it is.
  absl::btree_map<uintptr_t, Range> ranges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_HOST_MEMORY_H_
