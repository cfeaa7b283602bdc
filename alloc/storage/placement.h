// Placement: the places of a mount's arena (its GPUs, its host memory) for
// what decides about them from above the filesystem core, the room keeper:
// their state now, and the two levers that change where the arena puts
// new blocks, a hold on a GPU and host memory kept ready. The decisions
// themselves are placement_rules.h's.
//
// Thread-safe.
#ifndef CUDAFS_ALLOC_STORAGE_PLACEMENT_H_
#define CUDAFS_ALLOC_STORAGE_PLACEMENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "alloc/devices/spill_readiness.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/placement_rules.h"

namespace cudafs {

class Placement {
 public:
  // `arena` must outlive the Placement.
  explicit Placement(Arena* arena) : arena_(arena) {}

  // Every place's state now, without its GPU's memory (which costs a
  // driver call a GPU: LookAt).
  std::vector<PlaceState> Places() const { return arena_->Places(); }
  // The memory of GPU place `part` now, as its driver reports it; nullopt
  // as PlaceState::gpu says.
  std::optional<Device::GpuMemory> LookAt(size_t part) const {
    return arena_->device().PartMemory(part);
  }

  // Offers GPU place `part` after every other (Arena::HoldBack), or again
  // in its turn.
  void HoldBack(size_t part, bool held) { arena_->HoldBack(part, held); }
  // Keeps `bytes` of host memory ready to take a move at link speed
  // (SpillReadiness::KeepReady): whether to call again soon.
  bool KeepReady(uint64_t bytes) {
    SpillReadiness* ready = arena_->device().spill_readiness();
    return ready != nullptr && ready->KeepReady(bytes);
  }

  // Decommits the empty granules the arena keeps a moment
  // (Arena::ReleaseLingering): memory another program may want.
  void ReleaseLingering() { arena_->ReleaseLingering(); }

  // One line naming place `part`, for logs and errors.
  std::string Describe(size_t part) const {
    return arena_->device().parts().at(part).description;
  }

 private:
  Arena* const arena_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_PLACEMENT_H_
