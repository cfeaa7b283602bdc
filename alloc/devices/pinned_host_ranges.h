// PinnedHostRanges: host memory handed to one GPU's device (buffers it
// allocated, ranges registered with it), pinned while the device may copy
// from it (its context lives), so that copies from it run at PCIe speed and
// the scatter kernel reads it at its host address. The memory outlives the
// contexts: the page cache's frames live as long as the mount.
//
// Pinning is the process's, not a device's: cuMemHostRegister takes a
// range once, under one context, and PORTABLE makes every context's copies
// DMA straight from it, while a pool hands each of its GPUs the same
// ranges. So the devices of one driver share one table of ranges
// (pinned_host_ranges.cc): a range is pinned under the context of the first
// device that may copy from it and stays pinned, that context retained
// with it, until none may. Unpinned under another GPU's copy in flight, the
// DMA would read pages no longer locked; the price is a bare context left
// on the GPU that pinned it while another GPU works.
//
// Thread-safe. The device serialises the calls that change what it uses
// against its context's life with its own lock, taken before this one (and
// this one before the shared table's).
#ifndef CUDAFS_ALLOC_DEVICES_PINNED_HOST_RANGES_H_
#define CUDAFS_ALLOC_DEVICES_PINNED_HOST_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "alloc/devices/device.h"

namespace cudafs {

class CudaContext;
class HostPins;

class PinnedHostRanges {
 public:
  // `context` must outlive this.
  explicit PinnedHostRanges(const CudaContext& context);
  // Lets go of every range: the buffers it allocated are unmapped once no
  // other device holds them. REQUIRES: UnpinAll since the last PinAll.
  ~PinnedHostRanges();

  // Plain memory; with `pin` (the context held and current) the device may
  // copy from it from now on, and it is pinned. Null when the memory cannot
  // be had.
  void* Allocate(size_t length, bool pin);
  // A caller's range, as Allocate's.
  void Register(void* memory, size_t length, bool pin);
  // Forgets a range, unpinning it when no other device may copy from it;
  // unmaps it when it was allocated here and no other device holds it.
  void Remove(void* memory);

  struct Pinned {
    int ranges = 0;
    size_t bytes = 0;
  };
  // The device may copy from every range from now on: pins those not
  // pinned. REQUIRES: the context current.
  Pinned PinAll();
  // It may no longer: unpins those no other device may copy from.
  // REQUIRES: the context current.
  void UnpinAll();

  // Every source of `copies` lies in memory pinned under this device's
  // context: the scatter kernel reads only those (another GPU's pin serves
  // this one's copy engines).
  bool AllPinned(absl::Span<const HostToDevice> copies) const;

 private:
  struct Range {
    size_t length = 0;
    bool used = false;    // counted in the table as a device that may copy from it
    bool pinned = false;  // under this device's context
  };
  void Add(void* memory, size_t length, bool owned, bool pin);
  // Counts this device in the table as one that may copy from the range;
  // false when it is not pinned (under any context).
  bool Use(uintptr_t start, Range& range) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CudaContext& context_;
  // The table shared by the devices of context_'s driver.
  const std::shared_ptr<HostPins> pins_;
  mutable absl::Mutex mu_;
  // Start of each range -> what it is.
  absl::btree_map<uintptr_t, Range> ranges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_PINNED_HOST_RANGES_H_
