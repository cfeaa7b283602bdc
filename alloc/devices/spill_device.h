// SpillDevice: the host memory of a pool (spill=) that file data leaves its
// GPUs for. Its memory is committed and registered with every GPU a chunk at
// a time, so that a GPU copies into it and out of it directly, at link
// speed. A chunk stays whole while any granule of it is committed, and an
// empty chunk is kept while KeepSpillReady asks for that much ready memory:
// committing fresh host memory is slower than the link (docs/DESIGN.md,
// "Giving memory back").
//
// Thread-safe.
#ifndef CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/device_wrapper.h"

namespace cudafs {

class SpillDevice final : public DeviceWrapper {
 public:
  static constexpr uint64_t kChunk = 256 * kMiB;

  // `host` holds the memory and must have a HostView; `gpus` copy into it
  // and must outlive this. `chunk` is a multiple of the granule.
  SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus, uint64_t chunk = kChunk);
  // Unregisters every chunk from the GPUs.
  ~SpillDevice() override;

  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;

  // Keeps `bytes` of registered memory ready beyond what is committed:
  // pins at most kReadyChunks more chunks toward it per call (a caller
  // polls; true while it made progress and more is wanted), and
  // releases emptied chunks above it at once. Best effort: memory the host
  // refuses is simply not ready.
  bool KeepSpillReady(uint64_t bytes) override;
  // Whether every chunk of the range is pinned.
  bool IsReady(uint64_t offset, uint64_t length) const override;
  static constexpr int kReadyChunks = 4;

  // Registered memory not committed.
  uint64_t SpillReadyBytes() const override;
  // Registered memory in all.
  uint64_t pinned_bytes() const;

 private:
  struct Chunk {
    uint64_t committed = 0;  // bytes of the arena committed in it
    bool pinned = false;     // committed whole and registered with the GPUs
    bool busy = false;       // being pinned or released, outside mu_
  };

  uint64_t ChunkLength(size_t chunk) const;
  // Commits chunk `chunk` whole and registers it; waits while another
  // thread does. REQUIRES: mu_ held (released while working).
  absl::Status Pin(size_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unregisters and decommits an empty chunk. REQUIRES: mu_ held
  // (released while working).
  void Release(size_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes [offset, offset + length) off the committed counts.
  void Uncount(uint64_t offset, uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases empty chunks, highest first, while ready memory exceeds the
  // target by a chunk.
  void ReleaseSurplus() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<Device*> gpus_;
  const uint64_t chunk_;
  mutable absl::Mutex mu_;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  uint64_t ready_target_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;     // bytes of pinned chunks
  uint64_t committed_ ABSL_GUARDED_BY(mu_) = 0;  // bytes committed (all in pinned chunks)
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_
