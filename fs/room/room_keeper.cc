#include "fs/room/room_keeper.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_format.h"
#include "alloc/base/log.h"

namespace cudafs {

namespace {

// How long to wait before trying again to bring data back to a GPU on which
// this process holds no context (whose free memory it cannot see without
// taking one).
constexpr absl::Duration kBlindRetry = absl::Seconds(30);

}  // namespace

RoomKeeper::RoomKeeper(Filesystem* filesystem, Placement* placement, Options options)
    : filesystem_(filesystem), placement_(placement), options_(std::move(options)) {
  const std::vector<PlaceState> places = placement_->Places();
  for (size_t part = 0; part < places.size(); ++part) {
    (places[part].spill ? spill_parts_ : gpu_parts_).push_back(part);
  }
  absl::MutexLock lock(&mu_);
  room_since_.assign(places.size(), absl::InfinitePast());
  next_look_.assign(places.size(), absl::InfinitePast());
  seen_.assign(places.size(), std::nullopt);
}

absl::Duration RoomKeeper::Round() {
  if (!active()) return options_.calm_interval;
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  EndHold(now);
  std::vector<PlaceState> places = placement_->Places();
  // Each GPU's memory as last looked at; those looked at now, updated.
  for (size_t p = 0; p < places.size(); ++p) places[p].gpu = seen_[p];
  bool spilled = false;
  for (const size_t part : spill_parts_) spilled |= places[part].used > 0;
  uint64_t on_gpus = 0;
  absl::Time next = now + options_.calm_interval;
  for (const size_t part : gpu_parts_) {
    on_gpus += places[part].used;
    if (now < next_look_[part]) {
      next = std::min(next, next_look_[part]);
      continue;
    }
    const std::optional<Device::GpuMemory> memory = places[part].gpu = seen_[part] =
        placement_->LookAt(part);
    // A GPU with twice its reserve free is asked again only after the calm
    // interval: a program allocating that fast fills the reserve before
    // any move could help, and asking the driver is the daemon's only
    // work at rest.
    if (memory && !spilled && !placement::Near(*memory)) {
      next_look_[part] = now + options_.calm_interval;
    } else {
      next = now + options_.interval;
    }
    if (memory && placement::Excess(*memory) > 0) {
      room_since_[part] = absl::InfinitePast();
      // Where it goes, by each other GPU's memory now.
      for (const size_t other : gpu_parts_) {
        if (other != part) places[other].gpu = seen_[other] = placement_->LookAt(other);
      }
      const uint64_t moved = filesystem_->MoveData(part, placement::MoveDestinations(places, part),
                                                   placement::Excess(*memory),
                                                   Filesystem::MoveOrder::kLeastRecentlyUsed);
      absl::MutexLock stats_lock(&stats_mu_);
      stats_.moved_out_bytes += moved;
      continue;
    }
    if (!spilled) continue;
    uint64_t budget = options_.return_per_round;
    if (memory) {
      if (placement::Room(*memory) == 0) {
        room_since_[part] = absl::InfinitePast();
        continue;
      }
      budget = std::min(budget, placement::Room(*memory));
    }
    if (room_since_[part] == absl::InfinitePast()) room_since_[part] = now;
    if (now - room_since_[part] < options_.settle || now < hold_until_) continue;
    uint64_t moved = 0;
    for (const size_t spill : spill_parts_) {
      const uint64_t back = filesystem_->MoveData(spill, {part}, budget - std::min(budget, moved),
                                                  Filesystem::MoveOrder::kMostRecentlyUsed);
      moved += back;
      absl::MutexLock stats_lock(&stats_mu_);
      stats_.moved_back_bytes += back;
    }
    // Not even a block fitted on a GPU this process cannot see: look again
    // much later rather than take a context every round.
    if (moved == 0 && !memory) room_since_[part] = now + kBlindRetry;
  }
  // More only while the GPUs' data stands still (committing host memory
  // takes memory bandwidth and a core that writes in progress want); less
  // at once.
  const uint64_t target = placement::ReadyTarget(places, options_.ready, on_gpus);
  const bool quiet = on_gpus == last_on_gpus_;
  last_on_gpus_ = on_gpus;
  if (quiet || target < ready_target_) {
    ready_target_ = target;
    if (placement_->KeepReady(target) && quiet) next = now + options_.interval;
  }
  return std::max(next - now, absl::ZeroDuration());
}

absl::Status RoomKeeper::MakeRoom(std::optional<uint64_t> bytes, bool hold, absl::string_view gpu) {
  absl::MutexLock lock(&mu_);
  {
    absl::MutexLock stats_lock(&stats_mu_);
    ++stats_.make_room_calls;
  }
  placement_->ReleaseLingering();
  if (!active()) {
    return absl::FailedPreconditionError(
        "this mount has no host memory to move its data to (spill=0, or no GPU)");
  }
  absl::c_fill(next_look_, absl::InfinitePast());
  std::vector<size_t> parts;
  for (const size_t part : gpu_parts_) {
    if (gpu.empty()) {
      parts.push_back(part);
      continue;
    }
    // A GPU holding no context of ours holds none of our data either.
    const std::optional<Device::GpuMemory> memory = placement_->LookAt(part);
    if (memory && memory->pci_bus_id == gpu) parts.push_back(part);
  }
  if (hold) {
    hold_until_ = options_.clock() + options_.hold;
    for (const size_t part : parts) placement_->HoldBack(part, true);
    holding_ = true;
  }
  for (const size_t part : parts) {
    const absl::Time start = absl::Now();
    uint64_t moved_here = 0;
    const auto log = [&] {
      if (moved_here == 0) return;
      LogInfo(absl::StrFormat("make-room: moved %d MiB off %s in %d ms", moved_here >> 20,
                              placement_->Describe(part),
                              absl::ToInt64Milliseconds(absl::Now() - start)));
    };
    for (;;) {
      const std::optional<Device::GpuMemory> memory = placement_->LookAt(part);
      if (!memory || (bytes && memory->free >= *bytes)) {  // done, or nothing of ours is there
        log();
        break;
      }
      const uint64_t wanted = bytes ? *bytes - memory->free : std::numeric_limits<uint64_t>::max();
      bool out_of_room = false;
      const uint64_t moved =
          filesystem_->MoveData(part, placement::RoomDestinations(placement_->Places()), wanted,
                                Filesystem::MoveOrder::kLeastRecentlyUsed, &out_of_room);
      moved_here += moved;
      {
        absl::MutexLock stats_lock(&stats_mu_);
        stats_.moved_out_bytes += moved;
      }
      if (moved > 0) continue;
      log();
      if (out_of_room) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: host memory (spill=) is full, and files are left on the GPU",
                            placement_->Describe(part)));
      }
      if (!bytes) break;  // all that can move has: the rest is mapped by other programs
      const std::optional<Device::GpuMemory> now = placement_->LookAt(part);
      if (!now || now->free >= *bytes) break;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: %d bytes free of the %d asked for, and no more of this mount's data can move "
          "off it (the rest is other programs' memory, or files they map)",
          placement_->Describe(part), now->free, *bytes));
    }
  }
  return absl::OkStatus();
}

void RoomKeeper::EndHold(absl::Time now) {
  if (!holding_ || now < hold_until_) return;
  for (const size_t part : gpu_parts_) placement_->HoldBack(part, false);
  holding_ = false;
}

RoomKeeper::Stats RoomKeeper::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

}  // namespace cudafs
