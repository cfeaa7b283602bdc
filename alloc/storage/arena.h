// Arena: buddy-allocated blocks of device memory, backed on demand. A block
// is handed out only once every granule under it is committed on the
// device, and a granule is decommitted once no block touches it (or a
// moment later: LingerEmptyGranules), so the device's memory follows what
// is stored. A new block's content is
// unspecified: callers write or Zero every byte they later read. A device of
// several parts (GPUs, host memory) has a buddy allocator per part: a block
// never straddles two, a caller names the part it prefers, spill parts come
// last, and the capacity bounds the sum (docs/DESIGN.md, *Several GPUs*).
//
// Thread-safe. Allocation and free take one short lock; committing and
// decommitting happen outside it, stalling only allocations that need those
// very granules, and data copies never take it.
#ifndef CUDAFS_ALLOC_STORAGE_ARENA_H_
#define CUDAFS_ALLOC_STORAGE_ARENA_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "alloc/devices/device.h"
#include "alloc/storage/buddy_allocator.h"
#include "alloc/storage/compaction_plan.h"
#include "alloc/storage/placement_rules.h"

namespace cudafs {

struct Block {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// One part of the arena (Device::parts).
struct ArenaPartStats {
  uint64_t capacity = 0;  // bytes it may hand out (the mount's capacity bounds the sum)
  uint64_t used = 0;      // bytes in allocated blocks
  uint64_t committed_bytes = 0;
};

struct ArenaStats {
  BuddyStats blocks;             // the whole arena
  uint64_t committed_bytes = 0;  // physical memory held on the device
  std::vector<ArenaPartStats> parts;
};

class Arena {
 public:
  // Manages the arena of `device`, which must outlive the Arena. Hands out
  // at most `capacity` bytes, rounded up to min_block (a power of two) and
  // capped at the device's arena: devices round their arena up to a granule
  // (2 MiB), but a mount offers the size= it was given, as tmpfs does. The
  // bytes past the capacity are never allocated, so never committed.
  Arena(Device* device, uint64_t min_block,
        uint64_t capacity = std::numeric_limits<uint64_t>::max());
  ~Arena();

  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A block of exactly `size` bytes (a power of two >= min_block), in
  // `part` when it has one that the device backs, else in another part
  // (the one with the most free bytes first, spill parts last).
  // ResourceExhausted when no free block that size exists or the device
  // cannot back it.
  absl::StatusOr<Block> Allocate(uint64_t size, size_t part = 0);
  // The same, for a block whose memory backs nothing outside it
  // (Exporter::Exclusive), so that a shared file can hand it out whole; never
  // in a spill part.
  absl::StatusOr<Block> AllocateExclusive(uint64_t size, size_t part = 0);
  // A block to move a block of the same size into, in the first of
  // `parts` that backs one; in a spill part, in memory the device keeps
  // ready where there is some (SpillReadiness::IsReady). The capacity does not
  // bound it: the bytes it takes are given back when the block it replaces
  // is freed.
  absl::StatusOr<Block> AllocateForMove(uint64_t size, absl::Span<const size_t> parts);
  void Free(Block block);
  // While one lives on a thread, that thread's frees of this arena wait,
  // and the outermost one frees them when it ends: a journal's record of a
  // change must land before another file may reuse the memory it gave up
  // (fs/core/journal_scope.h). Null: holds nothing.
  class HeldFrees {
   public:
    explicit HeldFrees(Arena* arena);
    HeldFrees(const HeldFrees&) = delete;
    HeldFrees& operator=(const HeldFrees&) = delete;
    ~HeldFrees();

   private:
    friend class Arena;
    Arena* arena_ = nullptr;  // null where this one holds nothing
    // Inline: most operations free a block or two, and every FORGET of a
    // small file holds one.
    absl::InlinedVector<Block, 2> blocks_;
  };
  // Takes exactly `block`, as another arena on the same device memory
  // handed it out, committing what it lacks (a device that kept the memory
  // keeps its bytes: Filesystem::LoadImage). Not bounded by the capacity:
  // what was stored stays. InvalidArgument for a block this arena could not
  // have handed out, or one not free.
  absl::Status Claim(Block block);
  // Once every block is claimed: decommits, in runs, the granules of the
  // GPU parts that no block holds, which a device adopted with more
  // committed than that would otherwise keep (a keeper learns of a GPU's
  // pieces whole, not of the decommits in them since: survive=on).
  void DecommitUnheld() ABSL_LOCKS_EXCLUDED(mu_);

  // Compaction (CompactionPlan). Once the partly used committed granules of
  // a GPU's part have more than kCompactionSlackGranules granules free in
  // all, and more than a kCompactionSlackShare-th of the bytes they hold,
  // plans to empty the sparsest of them into the fullest, as many as those
  // have room for, until the bytes to move reach `budget`. Spill parts are
  // left as they are (their memory goes back by the chunk). An empty plan:
  // nothing worth moving.
  static constexpr uint64_t kCompactionSlackGranules = 4;
  static constexpr uint64_t kCompactionSlackShare = 16;
  CompactionPlan PlanCompaction(uint64_t budget) const;
  // A block of `size` bytes in part `part` to move a block of a granule
  // `plan` empties into: in a granule it fills, still committed, so that
  // compacting commits nothing. Like AllocateForMove, not bounded by the
  // capacity. ResourceExhausted when none of them has a free block that
  // size.
  absl::StatusOr<Block> AllocateForCompaction(uint64_t size, size_t part,
                                              const CompactionPlan& plan);

  // From now on the last granule of a part (spill parts aside) to lose its
  // last block, one smaller than a granule, stays committed, one per part,
  // until ReleaseLingering: a small file made and removed over and over,
  // alone in its granule, then commits memory once, not each time (a
  // commit is a fallocate of host memory, or a GPU mapping). Larger blocks
  // may be mapped by another process, which must see them go at once. Off
  // until called; the daemon calls ReleaseLingering every second, and
  // before making room.
  void LingerEmptyGranules();
  // Decommits the granules kept so.
  void ReleaseLingering() ABSL_LOCKS_EXCLUDED(mu_);

  // Splits an allocated block (size > min_block) into its two halves, each
  // then freed on its own: {lower, upper}.
  std::pair<Block, Block> Split(Block block);

  size_t part_count() const { return part_offsets_.size(); }
  // The part holding arena offset `offset`.
  size_t PartOf(uint64_t offset) const;
  bool IsSpillPart(size_t part) const { return spill_[part]; }
  // How many parts come before the first spill part (Device: spill parts
  // are last).
  size_t leading_parts() const;
  // Each part's state for the placement rules (placement_rules.h), without
  // its GPU's memory.
  std::vector<PlaceState> Places() const;
  // Whether `block` may be handed out whole to another process: GPU memory
  // backing nothing outside it (Exporter::Exclusive). The one place that
  // decides it, for new blocks (AllocateExclusive) and for a file's blocks
  // as they are (ExtentMap::Share).
  bool Exclusive(Block block) const;
  // A part held back is offered after every other one, spill parts
  // included: room made on it for another program (RoomKeeper::MakeRoom)
  // stays free while that program starts. Exclusive blocks still come from
  // it where no other part has one.
  void HoldBack(size_t part, bool held);

  Device& device() const { return *device_; }
  uint64_t min_block() const { return min_block_; }
  uint64_t capacity() const { return capacity_; }  // bytes it may hand out
  ArenaStats Stats() const;

 private:
  // One part's buddy allocator, over its range (offsets from the part's
  // start).
  struct Part {
    Part(uint64_t range, uint64_t min_block) : allocator(range, min_block) {}
    BuddyAllocator allocator;
    uint64_t committed_granules = 0;
  };

  // Allocate's work, for the first free block `accept` takes (arena
  // offsets), tried in `preferred` first.
  absl::StatusOr<Block> AllocateWhere(uint64_t size, size_t preferred,
                                      absl::FunctionRef<bool(uint64_t offset)> accept);
  // The same in one part; `bounded`: within the capacity.
  absl::StatusOr<Block> AllocateIn(size_t part, uint64_t size,
                                   absl::FunctionRef<bool(uint64_t offset)> accept,
                                   bool bounded = true);
  // AllocateIn's work, for the block `pick` takes from the part's
  // allocator (its offset there; nullopt: none).
  absl::StatusOr<Block> Take(size_t part, uint64_t size,
                             absl::FunctionRef<std::optional<uint64_t>(BuddyAllocator&)> pick,
                             bool bounded);
  // Bytes the arena may still hand out, whatever the part.
  uint64_t Headroom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Granule {
    uint32_t users = 0;      // allocated blocks touching it, settled or not
    uint32_t used = 0;       // bytes of those blocks in it
    bool committed = false;  // the device backs it
    bool failed = false;     // its commit failed: its users give up
    // Being decommitted outside the lock (its last block was freed): not
    // usable, and not to be committed again, until that is done.
    bool releasing = false;
  };

  // Counts the block as a user of each granule under it; returns the
  // granules that had none, which the caller must commit (once none of
  // them is releasing).
  std::vector<uint64_t> Reference(Block block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Undoes Reference; returns the committed granules left without users,
  // now releasing, which the caller must pass to Release.
  std::vector<uint64_t> Unreference(Block block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decommits releasing granules, then forgets those still without users.
  void Release(const std::vector<uint64_t>& granules) ABSL_LOCKS_EXCLUDED(mu_);
  bool AnyReleasing(const std::vector<uint64_t>& granules) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bytes of `block` in granule `g`.
  uint32_t BytesIn(Block block, uint64_t g) const;
  // True once no granule under the block is still being committed.
  bool Settled(Block block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyFailed(Block block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Device* const device_;
  const uint64_t min_block_;
  const uint64_t capacity_;
  const uint64_t granule_;

  mutable absl::Mutex mu_;
  // Where each part starts, and its allocator, by offset.
  const std::vector<uint64_t> part_offsets_;
  const std::vector<bool> spill_;  // by part: DevicePart::spill
  // The device's, where it keeps host memory ready for moves; else null.
  SpillReadiness* const ready_;
  // By part: HoldBack. Read with no lock, as every allocation asks.
  std::vector<std::atomic<bool>> held_back_;
  std::vector<std::unique_ptr<Part>> parts_ ABSL_GUARDED_BY(mu_);
  // Granule index -> its state. Only granules some block touches have an
  // entry, so this grows with use, not with arena size.
  absl::flat_hash_map<uint64_t, Granule> granules_ ABSL_GUARDED_BY(mu_);
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;  // bytes in allocated blocks, all parts
  bool linger_ ABSL_GUARDED_BY(mu_) = false;
  // By part: the empty granule it keeps committed (LingerEmptyGranules).
  std::vector<std::optional<uint64_t>> lingering_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_ARENA_H_
