// CompactionPlan: which committed granules of an arena a compaction empties
// and which it fills, made by Arena::PlanCompaction. The blocks of the
// granules to empty move (ExtentMap::Compact) into blocks that
// Arena::AllocateForCompaction finds in the granules to fill, so that the
// emptied granules are decommitted: small files that survived deletes no
// longer pin memory they barely use (docs/DESIGN.md, *Compaction*).
//
// A plan is a snapshot: blocks freed or allocated since are found where
// they are when a move looks, and a granule to fill that is gone takes
// nothing. Immutable once made; safe to share between threads.
#ifndef CUDAFS_ALLOC_STORAGE_COMPACTION_PLAN_H_
#define CUDAFS_ALLOC_STORAGE_COMPACTION_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace cudafs {

class CompactionPlan {
 public:
  CompactionPlan() = default;

  bool empty() const { return sources_.empty(); }
  // Whether a block at arena offset `offset` of `size` bytes lies in a
  // granule to empty (only blocks smaller than a granule ever do).
  bool Empties(uint64_t offset, uint64_t size) const {
    return size < granule_ && sources_.contains(offset / granule_);
  }
  // Bytes of the blocks in the granules to empty, when planned.
  uint64_t bytes() const { return bytes_; }
  // How many granules it empties.
  size_t granules() const { return sources_.size(); }

 private:
  friend class Arena;

  uint64_t granule_ = 0;
  absl::flat_hash_set<uint64_t> sources_;  // granule indices
  // Granule indices to move blocks into, the fullest first.
  std::vector<uint64_t> destinations_;
  uint64_t bytes_ = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_COMPACTION_PLAN_H_
