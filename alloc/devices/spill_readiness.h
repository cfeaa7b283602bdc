// SpillReadiness: host memory kept ready, committed and pinned ahead, so that
// data moved out of a GPU into a device's spill parts goes at link speed
// rather than at the rate the host commits fresh memory (SpillDevice; a
// PooledDevice offers its spill member's). Thread-safe.
#ifndef CUDAFS_ALLOC_DEVICES_SPILL_READINESS_H_
#define CUDAFS_ALLOC_DEVICES_SPILL_READINESS_H_

#include <cstdint>

namespace cudafs {

class SpillReadiness {
 public:
  virtual ~SpillReadiness() = default;

  // Keeps `bytes` ready, a step a call. Best effort: memory the host
  // refuses is simply not ready. Whether a call should come again soon: it
  // made progress and more is wanted.
  virtual bool KeepReady(uint64_t bytes) = 0;
  // Memory so kept and holding no data now (what --stats shows the
  // daemon's resident memory went to).
  virtual uint64_t ready_bytes() const = 0;
  // Whether arena range [offset, offset + length) lies in memory kept
  // ready, so that committing it costs nothing.
  virtual bool IsReady(uint64_t offset, uint64_t length) const = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_SPILL_READINESS_H_
