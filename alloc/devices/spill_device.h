// SpillDevice: the host memory of a pool (spill=) that file data leaves its
// GPUs for. Its memory is committed and registered with every GPU a chunk at
// a time, so that a GPU copies into it and out of it directly, at link
// speed. A chunk stays whole while any granule of it is committed, and an
// empty chunk is kept while KeepReady asks for that much ready memory.
//
// Committing fresh host memory is what a move into host memory waits for
// (docs/DESIGN.md, "Giving memory back"), so a chunk is committed on several
// threads at once (CommitPool), and while data arrives the next few chunks
// are pinned ahead of it on threads of their own: the copies into one chunk
// run while the next ones are committed and registered. Chunks pinned ahead
// and left unused are let go once no data has arrived for a while.
//
// Thread-safe.
#ifndef CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/commit_pool.h"
#include "alloc/devices/device_wrapper.h"
#include "alloc/devices/spill_readiness.h"

namespace cudafs {

class SpillDevice final : public DeviceWrapper, public SpillReadiness {
 public:
  static constexpr uint64_t kChunk = 256 * kMiB;
  static constexpr int kReadyChunks = 4;
  // A few chunks: enough that a copy finds the next chunk pinned by the
  // time it wants it, few enough that what a move leaves pinned when it
  // stops is small (and goes after ahead_idle).
  static constexpr int kAheadChunks = 4;

  struct Options {
    // A multiple of the granule.
    uint64_t chunk = kChunk;
    // Threads committing one chunk (CommitPool), the caller included.
    size_t commit_threads = CommitPool::DefaultThreads();
    // Chunks pinned ahead of arriving data at most (0: none).
    int ahead_chunks = kAheadChunks;
    // Chunks pinned ahead are let go once no data has arrived for this
    // long: longer than the room keeper waits between rounds, so that a
    // program taking a GPU's memory round after round keeps them.
    absl::Duration ahead_idle = absl::Seconds(1);
  };

  // `host` holds the memory and must have a HostView; `gpus` copy into it
  // and must outlive this.
  SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus);
  SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus, Options options);
  // Stops pinning ahead, and unregisters every chunk from the GPUs.
  ~SpillDevice() override;

  // Commits what the range's chunks lack, and asks for chunks pinned ahead.
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;

  // Keeps `bytes` of registered memory ready beyond what is committed
  // (chunks pinned ahead not counted): pins at most kReadyChunks more
  // chunks toward it per call (a caller polls; true while it made
  // progress and more is wanted), and releases emptied chunks above it at
  // once. Best effort: memory the host refuses is simply not ready.
  bool KeepReady(uint64_t bytes) override;
  // Whether every chunk of the range is pinned (ready, or pinned ahead).
  bool IsReady(uint64_t offset, uint64_t length) const override;
  // Registered memory not committed.
  uint64_t ready_bytes() const override;
  SpillReadiness* spill_readiness() override { return this; }
  // Chunks pinned ahead (or being pinned ahead) and holding no data yet.
  int ahead_chunks() const;
  // Bytes committed: what holds data.
  uint64_t committed_bytes() const;

 private:
  // Threads pinning ahead: two, so that one chunk's registration overlaps
  // the next one's commit.
  static constexpr size_t kAheadThreads = 2;

  // What pinning took since the last report, logged once data stops
  // arriving: a move's stages, as bench/move_rate.sh shows them.
  struct PinCosts {
    uint64_t bytes = 0;
    int chunks = 0;
    int ahead = 0;          // of them, pinned ahead of the data
    absl::Duration commit;  // summed over the threads pinning
    absl::Duration register_memory;
    absl::Duration waited;  // by Commit calls, for chunks to be pinned
  };

  struct Chunk {
    uint64_t committed = 0;  // bytes of the arena committed in it
    bool pinned = false;     // committed whole and registered with the GPUs
    bool busy = false;       // being pinned or released, outside mu_
    bool ahead = false;      // pinned (or being pinned) ahead, no data yet
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
  // Ready memory: pinned, empty, not pinned ahead.
  uint64_t ReadyBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases empty chunks not pinned ahead, highest first, while ready
  // memory exceeds the target by a chunk.
  void ReleaseSurplus() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Chunk `chunk` is no longer pinned ahead (data came, or it went idle).
  void EndAhead(size_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lowest chunk neither pinned nor being pinned: where the arena puts
  // data once the ready memory is taken (it allocates lowest first).
  std::optional<size_t> NextToPinAhead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A pin-ahead thread's loop: pins chunks while data arrives and the
  // bound allows, and lets them go (and logs costs_) once it stopped.
  void PinAhead();
  void ReportCosts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<Device*> gpus_;
  const Options options_;
  CommitPool pool_;
  mutable absl::Mutex mu_;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  uint64_t ready_target_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;     // bytes of pinned chunks
  uint64_t committed_ ABSL_GUARDED_BY(mu_) = 0;  // bytes committed (all in pinned chunks)
  // Chunks flagged ahead, and the bytes of those already pinned.
  int ahead_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ahead_pinned_ ABSL_GUARDED_BY(mu_) = 0;
  // Data arrived since the pin-ahead threads last found nothing to do.
  bool ahead_wanted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_arrival_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  PinCosts costs_ ABSL_GUARDED_BY(mu_);
  // Started with the first data, so that a mount that never spills runs
  // none.
  std::vector<std::thread> ahead_threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_SPILL_DEVICE_H_
