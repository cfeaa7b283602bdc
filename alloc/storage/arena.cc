#include "alloc/storage/arena.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/devices/exporter.h"
#include "alloc/devices/spill_readiness.h"

namespace cudafs {

namespace {

// `capacity` rounded up to min_block, within the device's parts (of which
// only whole min_blocks can be allocated).
uint64_t UsableCapacity(const Device& device, uint64_t min_block, uint64_t capacity) {
  uint64_t whole_arena = 0;
  for (const DevicePart& part : device.parts()) {
    whole_arena += part.range.length / min_block * min_block;
  }
  const uint64_t wanted = std::min(capacity, whole_arena);
  return (wanted + min_block - 1) / min_block * min_block;
}

std::vector<uint64_t> PartOffsets(const Device& device) {
  std::vector<uint64_t> offsets;
  for (const DevicePart& part : device.parts()) offsets.push_back(part.range.offset);
  return offsets;
}

std::vector<bool> SpillParts(const Device& device) {
  std::vector<bool> spill;
  for (const DevicePart& part : device.parts()) spill.push_back(part.spill);
  return spill;
}

}  // namespace

Arena::Arena(Device* device, uint64_t min_block, uint64_t capacity)
    : device_(device),
      min_block_(min_block),
      capacity_(UsableCapacity(*device, min_block, capacity)),
      granule_(device->granule_size()),
      part_offsets_(PartOffsets(*device)),
      spill_(SpillParts(*device)),
      ready_(device->spill_readiness()),
      held_back_(part_offsets_.size()) {
  // The buddy allocator covers a range of any multiple of min_block with
  // the aligned power-of-two blocks of its binary decomposition, so the
  // bytes past the capacity are simply not in it. Several parts may each
  // fill up to the capacity: Headroom bounds their sum.
  absl::MutexLock lock(&mu_);
  for (const DevicePart& part : device->parts()) {
    const uint64_t range = std::min<uint64_t>(part.range.length / min_block * min_block, capacity_);
    parts_.push_back(std::make_unique<Part>(range, min_block));
  }
  lingering_.resize(parts_.size());
}

Arena::~Arena() {
  absl::MutexLock lock(&mu_);
  for (const auto& [index, granule] : granules_) {
    if (granule.committed) device_->Decommit(index * granule_, granule_).IgnoreError();
  }
}

absl::StatusOr<Block> Arena::Allocate(uint64_t size, size_t part) {
  return AllocateWhere(size, part, [](uint64_t) { return true; });
}

absl::StatusOr<Block> Arena::AllocateExclusive(uint64_t size, size_t part) {
  // Free ranges where a piece of memory still backing a neighbour lingers
  // (a block split off a larger one) are passed over.
  return AllocateWhere(size, part,
                       [this, size](uint64_t offset) { return Exclusive({offset, size}); });
}

absl::StatusOr<Block> Arena::AllocateForMove(uint64_t size, absl::Span<const size_t> parts) {
  absl::StatusOr<Block> block =
      absl::ResourceExhaustedError("no part to move the block into");
  // As Allocate: ENOSPC if any part was full, else the last error.
  bool full = false;
  for (const size_t part : parts) {
    // Host memory kept ready takes the block with no commit (the fresh
    // memory a commit would fault in is what makes moves slow).
    if (spill_[part] && ready_ != nullptr) {
      block = AllocateIn(
          part, size, [&](uint64_t offset) { return ready_->IsReady(offset, size); },
          /*bounded=*/false);
      if (block.ok()) return block;
    }
    block = AllocateIn(part, size, [](uint64_t) { return true; }, /*bounded=*/false);
    if (block.ok()) return block;
    full |= absl::IsResourceExhausted(block.status());
  }
  if (full) return absl::ResourceExhaustedError("no room to move the block into");
  return block;
}

absl::StatusOr<Block> Arena::AllocateWhere(uint64_t size, size_t preferred,
                                           absl::FunctionRef<bool(uint64_t offset)> accept) {
  preferred = std::min(preferred, part_offsets_.size() - 1);
  const bool preferred_held_back = held_back_[preferred].load(std::memory_order_relaxed);
  absl::StatusOr<Block> block =
      absl::ResourceExhaustedError("every part of the arena is held back or full");
  if (!preferred_held_back) {
    block = AllocateIn(preferred, size, accept);
    if (block.ok() || part_offsets_.size() == 1) return block;
  }
  // The others in the placement rules' order. A part whose device failed
  // or is full (reserve=) refuses; the caller hears ENOSPC if any part was
  // full, else the preferred part's error.
  const std::vector<size_t> others = placement::Fallbacks(
      Places(), preferred_held_back ? std::nullopt : std::optional<size_t>(preferred));
  for (const size_t part : others) {
    absl::StatusOr<Block> other = AllocateIn(part, size, accept);
    if (other.ok()) return other;
    if (absl::IsResourceExhausted(other.status())) block = other;
  }
  return block;
}

absl::StatusOr<Block> Arena::AllocateIn(size_t part, uint64_t size,
                                        absl::FunctionRef<bool(uint64_t offset)> accept,
                                        bool bounded) {
  const uint64_t base = part_offsets_[part];
  return Take(
      part, size,
      [&](BuddyAllocator& allocator) {
        return allocator.AllocateWhere(size, [&](uint64_t local) { return accept(base + local); });
      },
      bounded);
}

absl::Status Arena::Claim(Block block) {
  const bool power_of_two = block.size >= min_block_ && std::has_single_bit(block.size);
  if (!power_of_two || block.offset % block.size != 0 || block.offset > ~uint64_t{0} - block.size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "block [%d, +%d) is no block of this arena (min_block %d)", block.offset, block.size,
        min_block_));
  }
  const size_t part = PartOf(block.offset);
  const uint64_t local = block.offset - part_offsets_[part];
  bool free = false;
  const absl::StatusOr<Block> taken = Take(
      part, block.size,
      [&](BuddyAllocator& allocator) -> std::optional<uint64_t> {
        free = allocator.AllocateAt(local, block.size);
        if (!free) return std::nullopt;
        return local;
      },
      /*bounded=*/false);
  if (taken.ok()) return absl::OkStatus();
  if (!free) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "block [%d, +%d) is not free in the arena: claimed twice, or past its end", block.offset,
        block.size));
  }
  return taken.status();
}

void Arena::DecommitUnheld() {
  const std::vector<DevicePart> parts = device_->parts();
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // [first, end) granules
  {
    absl::MutexLock lock(&mu_);
    for (size_t p = 0; p < parts.size() && p < spill_.size(); ++p) {
      if (spill_[p]) continue;
      const uint64_t end = (parts[p].range.offset + parts[p].range.length) / granule_;
      for (uint64_t g = parts[p].range.offset / granule_; g < end; ++g) {
        if (granules_.contains(g)) continue;
        if (!runs.empty() && runs.back().second == g) {
          ++runs.back().second;
        } else {
          runs.push_back({g, g + 1});
        }
      }
    }
  }
  for (const auto& [first, end] : runs) {
    device_->Decommit(first * granule_, (end - first) * granule_).IgnoreError();
  }
}

absl::StatusOr<Block> Arena::Take(size_t part, uint64_t size,
                                  absl::FunctionRef<std::optional<uint64_t>(BuddyAllocator&)> pick,
                                  bool bounded) {
  const uint64_t base = part_offsets_[part];
  Block block{0, size};
  std::vector<uint64_t> to_commit;
  {
    absl::MutexLock lock(&mu_);
    std::optional<uint64_t> offset;
    if (!bounded || size <= Headroom()) offset = pick(parts_[part]->allocator);
    if (!offset) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("no free block of %d bytes in the arena", size));
    }
    block.offset = base + *offset;
    used_ += size;
    to_commit = Reference(block);
    // A granule freed a moment ago may still be on its way out.
    struct Fresh {
      const Arena* arena;
      const std::vector<uint64_t>* granules;
    } fresh{this, &to_commit};
    mu_.Await(absl::Condition(
        +[](Fresh* f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return !f->arena->AnyReleasing(*f->granules);
        },
        &fresh));
  }
  // Other threads allocating in these granules wait for this commit (below);
  // everyone else goes on.
  // Each run of adjacent granules is one Commit, so that the device can
  // back a large block with one large physical allocation.
  absl::Status status = absl::OkStatus();
  size_t committed = 0;
  while (committed < to_commit.size()) {
    size_t run = 1;
    while (committed + run < to_commit.size() &&
           to_commit[committed + run] == to_commit[committed] + run) {
      ++run;
    }
    status = device_->Commit(to_commit[committed] * granule_, run * granule_);
    if (!status.ok()) break;
    committed += run;
  }
  std::vector<uint64_t> to_release;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < to_commit.size(); ++i) {
      Granule& granule = granules_.at(to_commit[i]);
      if (i < committed) {
        granule.committed = true;
        ++parts_[part]->committed_granules;
      } else {
        granule.failed = true;
      }
    }
    struct Wait {
      const Arena* arena;
      Block block;
    } wait{this, block};
    mu_.Await(absl::Condition(
        +[](Wait* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->arena->Settled(w->block); },
        &wait));
    if (status.ok() && !AnyFailed(block)) return block;
    to_release = Unreference(block);
    parts_[part]->allocator.Free(block.offset - base, block.size);
    used_ -= block.size;
  }
  Release(to_release);
  if (!status.ok()) return status;
  return absl::ResourceExhaustedError("the device could not back the block");
}

namespace {
// The thread's outermost HeldFrees, if any.
thread_local Arena::HeldFrees* t_held_frees = nullptr;
}  // namespace

Arena::HeldFrees::HeldFrees(Arena* arena) {
  if (arena == nullptr || t_held_frees != nullptr) return;  // an outer one holds them
  arena_ = arena;
  t_held_frees = this;
}

Arena::HeldFrees::~HeldFrees() {
  if (arena_ == nullptr) return;
  t_held_frees = nullptr;
  for (const Block& block : blocks_) arena_->Free(block);
}

void Arena::Free(Block block) {
  if (t_held_frees != nullptr && t_held_frees->arena_ == this) {
    t_held_frees->blocks_.push_back(block);
    return;
  }
  const size_t part = PartOf(block.offset);
  std::vector<uint64_t> to_release;
  {
    absl::MutexLock lock(&mu_);
    to_release = Unreference(block);
    parts_[part]->allocator.Free(block.offset - part_offsets_[part], block.size);
    used_ -= block.size;
  }
  Release(to_release);
}

CompactionPlan Arena::PlanCompaction(uint64_t budget) const {
  CompactionPlan plan;
  plan.granule_ = granule_;
  absl::MutexLock lock(&mu_);
  // Most looks find every part packed: that much needs no pass over the
  // granules.
  bool packed = true;
  for (size_t p = 0; p < parts_.size(); ++p) {
    const uint64_t committed = parts_[p]->committed_granules * granule_;
    const uint64_t used = parts_[p]->allocator.Stats().used;
    if (!spill_[p] && committed > used + kCompactionSlackGranules * granule_) packed = false;
  }
  if (packed) return plan;
  // By part: (bytes used, index) of each committed granule partly used.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> partial(parts_.size());
  for (const auto& [index, granule] : granules_) {
    // An empty one lingers: nothing to move, and not for filling.
    if (!granule.committed || granule.releasing || granule.users == 0 || granule.used >= granule_) {
      continue;
    }
    const size_t part = PartOf(index * granule_);
    if (!spill_[part]) partial[part].emplace_back(granule.used, index);
  }
  for (std::vector<std::pair<uint64_t, uint64_t>>& granules : partial) {
    uint64_t used = 0;
    for (const auto& [bytes, index] : granules) used += bytes;
    const uint64_t free = granules.size() * granule_ - used;
    if (free <= std::max(kCompactionSlackGranules * granule_, used / kCompactionSlackShare)) {
      continue;
    }
    std::sort(granules.begin(), granules.end());
    // The sparsest granules go into the fullest ones while those have room
    // for every byte (a block too large for their holes moves in pieces,
    // ExtentMap::Compact), so each move leaves a sparse granule sparser and
    // a full one fuller, and packing never undoes itself.
    size_t sparse = 0;
    size_t full = granules.size();  // granules[full, size) are filled
    uint64_t moving = 0;
    uint64_t room = 0;
    while (sparse < full && plan.bytes_ < budget) {
      const uint64_t bytes = granules[sparse].first;
      while (room < moving + bytes && full - 1 > sparse) {
        --full;
        room += granule_ - granules[full].first;
        plan.destinations_.push_back(granules[full].second);
      }
      if (room < moving + bytes) break;
      plan.sources_.insert(granules[sparse].second);
      moving += bytes;
      plan.bytes_ += bytes;
      ++sparse;
    }
  }
  return plan;
}

absl::StatusOr<Block> Arena::AllocateForCompaction(uint64_t size, size_t part,
                                                   const CompactionPlan& plan) {
  const uint64_t base = part_offsets_[part];
  absl::MutexLock lock(&mu_);
  for (const uint64_t g : plan.destinations_) {
    const uint64_t start = g * granule_;
    if (start < base || PartOf(start) != part) continue;
    const auto it = granules_.find(g);
    if (it == granules_.end() || !it->second.committed || it->second.releasing) continue;
    const std::optional<uint64_t> local =
        parts_[part]->allocator.AllocateWithin(size, start - base, start - base + granule_);
    if (!local) continue;
    const Block block{base + *local, size};
    used_ += size;
    // Its granule is committed, and stays so while the block uses it.
    Reference(block);
    return block;
  }
  return absl::ResourceExhaustedError("no room in the granules compaction fills");
}

size_t Arena::PartOf(uint64_t offset) const {
  return static_cast<size_t>(
      std::upper_bound(part_offsets_.begin(), part_offsets_.end(), offset) -
      part_offsets_.begin() - 1);
}

uint64_t Arena::Headroom() const { return used_ < capacity_ ? capacity_ - used_ : 0; }

void Arena::HoldBack(size_t part, bool held) {
  held_back_.at(part).store(held, std::memory_order_relaxed);
}

size_t Arena::leading_parts() const {
  return static_cast<size_t>(std::find(spill_.begin(), spill_.end(), true) - spill_.begin());
}

std::vector<PlaceState> Arena::Places() const {
  absl::MutexLock lock(&mu_);
  std::vector<PlaceState> places(parts_.size());
  for (size_t p = 0; p < parts_.size(); ++p) {
    const BuddyStats blocks = parts_[p]->allocator.Stats();
    places[p].spill = spill_[p];
    places[p].held_back = held_back_[p].load(std::memory_order_relaxed);
    places[p].free = blocks.free;
    places[p].used = blocks.used;
  }
  return places;
}

bool Arena::Exclusive(Block block) const {
  const Exporter* exporter = device_->exporter();
  return !spill_[PartOf(block.offset)] && exporter != nullptr &&
         exporter->Exclusive({block.offset, block.size});
}

void Arena::Release(const std::vector<uint64_t>& granules) {
  if (granules.empty()) return;
  // A failed decommit only leaks physical memory until unmount; the
  // granule is recommitted (a no-op for most devices) on next use.
  for (const uint64_t g : granules) device_->Decommit(g * granule_, granule_).IgnoreError();
  absl::MutexLock lock(&mu_);
  for (const uint64_t g : granules) {
    auto it = granules_.find(g);
    Granule& granule = it->second;
    granule.releasing = false;
    granule.committed = false;
    --parts_[PartOf(g * granule_)]->committed_granules;
    // A block allocated meanwhile waits to commit it afresh.
    if (granule.users == 0) granules_.erase(it);
  }
}

void Arena::LingerEmptyGranules() {
  absl::MutexLock lock(&mu_);
  linger_ = true;
}

void Arena::ReleaseLingering() {
  std::vector<uint64_t> to_release;
  {
    absl::MutexLock lock(&mu_);
    for (std::optional<uint64_t>& g : lingering_) {
      if (!g) continue;
      granules_.at(*g).releasing = true;
      to_release.push_back(*g);
      g.reset();
    }
  }
  Release(to_release);
}

bool Arena::AnyReleasing(const std::vector<uint64_t>& granules) const {
  for (const uint64_t g : granules) {
    if (granules_.at(g).releasing) return true;
  }
  return false;
}

std::pair<Block, Block> Arena::Split(Block block) {
  const Block lower{block.offset, block.size / 2};
  const Block upper{block.offset + block.size / 2, block.size / 2};
  const size_t part = PartOf(block.offset);
  absl::MutexLock lock(&mu_);
  parts_[part]->allocator.Split(block.offset - part_offsets_[part], block.size);
  // Halves of a block no larger than a granule share its granule, which now
  // has one more block keeping it committed.
  if (block.size <= granule_) ++granules_.at(block.offset / granule_).users;
  return {lower, upper};
}

std::vector<uint64_t> Arena::Reference(Block block) {
  std::vector<uint64_t> fresh;
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    Granule& granule = granules_[g];
    granule.used += BytesIn(block, g);
    if (granule.users++ > 0) continue;
    if (granule.committed && !granule.releasing) {
      // Lingering: still backed, and no longer kept.
      lingering_[PartOf(g * granule_)].reset();
      continue;
    }
    fresh.push_back(g);
  }
  return fresh;
}

std::vector<uint64_t> Arena::Unreference(Block block) {
  std::vector<uint64_t> to_release;
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    auto it = granules_.find(g);
    Granule& granule = it->second;
    granule.used -= BytesIn(block, g);
    if (--granule.users > 0) continue;
    if (granule.releasing) continue;  // that release finishes it
    if (granule.committed) {
      const size_t part = PartOf(g * granule_);
      // Only under a small block: a block of a granule or more may be
      // mapped by another process (a shared file's), which must see its
      // memory go at once (ExtentMap::Share).
      if (linger_ && block.size < granule_ && !spill_[part] && !lingering_[part]) {
        lingering_[part] = g;
        continue;
      }
      granule.releasing = true;
      to_release.push_back(g);
      continue;
    }
    granules_.erase(it);
  }
  return to_release;
}

uint32_t Arena::BytesIn(Block block, uint64_t g) const {
  const uint64_t from = std::max(block.offset, g * granule_);
  const uint64_t to = std::min(block.offset + block.size, (g + 1) * granule_);
  return static_cast<uint32_t>(to - from);
}

bool Arena::Settled(Block block) const {
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    const Granule& granule = granules_.at(g);
    if (granule.releasing || (!granule.committed && !granule.failed)) return false;
  }
  return true;
}

bool Arena::AnyFailed(Block block) const {
  const uint64_t first = block.offset / granule_;
  const uint64_t last = (block.offset + block.size - 1) / granule_;
  for (uint64_t g = first; g <= last; ++g) {
    if (granules_.at(g).failed) return true;
  }
  return false;
}

ArenaStats Arena::Stats() const {
  absl::MutexLock lock(&mu_);
  ArenaStats stats;
  BuddyStats& all = stats.blocks;
  for (const auto& part : parts_) {
    const BuddyStats blocks = part->allocator.Stats();
    stats.parts.push_back({blocks.capacity, blocks.used, part->committed_granules * granule_});
    stats.committed_bytes += part->committed_granules * granule_;
    all.largest_free = std::max(all.largest_free, blocks.largest_free);
    all.allocated_blocks += blocks.allocated_blocks;
  }
  all.capacity = capacity_;
  // A move holds both its blocks for a moment (AllocateForMove).
  all.used = std::min(used_, capacity_);
  all.free = Headroom();
  // No block larger than what the capacity still allows.
  if (all.largest_free > all.free) all.largest_free = all.free == 0 ? 0 : std::bit_floor(all.free);
  all.fragmentation =
      all.free == 0 ? 0 : 1 - static_cast<double>(all.largest_free) / static_cast<double>(all.free);
  return stats;
}

}  // namespace cudafs
