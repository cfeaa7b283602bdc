// Placement rules: every decision on which place (a part of the arena: a
// GPU, host memory) file bytes go to, and how much moves between places,
// as pure functions of the places' state. The arena, the extent maps and
// the room keeper ask these and decide nothing of their own, so each rule
// is written once and tested without a device (docs/DESIGN.md,
// *Placement*).
#ifndef CUDAFS_ALLOC_STORAGE_PLACEMENT_RULES_H_
#define CUDAFS_ALLOC_STORAGE_PLACEMENT_RULES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/device.h"

namespace cudafs {

// One place as the rules see it, by part index.
struct PlaceState {
  // Host memory that takes bytes only where no GPU can (spill=): offered
  // last, never for a shared file's blocks.
  bool spill = false;
  // Room made on it for another program (a make-room's hold): offered
  // after every other place, spill places included.
  bool held_back = false;
  uint64_t free = 0;  // bytes its allocator has free
  uint64_t used = 0;  // bytes in its blocks
  // Its GPU's memory as the driver reports it now, reserve= included;
  // nullopt for host memory, and for a GPU this process holds no context
  // on (nothing of ours is there, and asking would take memory).
  std::optional<Device::GpuMemory> gpu;
};

namespace placement {

// Host memory kept ready by default while GPUs are near their reserves,
// for all of them together (host memory is one place): enough for the
// first chunks of a move, by which time the spill place pins ahead of the
// copies; more would be memory held for a move that may never come.
inline constexpr uint64_t kNearReady = kGiB;

// The GPUs: the places before the first spill place (spill places come
// last).
size_t GpuCount(absl::Span<const PlaceState> places);

// Where a new file's blocks go: the GPU with the most free bytes that is
// not held back (0 when none is).
size_t Home(absl::Span<const PlaceState> places);
// The place for a block of `size` at file offset `offset` of a file whose
// home is `home`: large extents are striped over the GPUs from the home
// on, so that a large file reads from all of them at once.
size_t Stripe(size_t home, uint64_t offset, uint64_t size, uint64_t max_extent, size_t gpus);
// The places to try for a new block once `tried` (if any) had none: the
// others with the most free bytes first, then spill places, then places
// held back.
std::vector<size_t> Fallbacks(absl::Span<const PlaceState> places, std::optional<size_t> tried);

// How far past its reserve a GPU under pressure is freed, and how much
// room past it must stay for data to come back: half the reserve each, so
// that a program taking memory step by step does not make data move for
// every step, and data that came back does not leave again at once.
uint64_t Margin(const Device::GpuMemory& gpu);
// Bytes to move off a GPU now: below its reserve, up to the margin past it.
uint64_t Excess(const Device::GpuMemory& gpu);
// Bytes that may come back to a GPU: its room past the reserve and the
// margin.
uint64_t Room(const Device::GpuMemory& gpu);
// Whether a GPU is near its reserve (less than twice free): then a move may
// come any moment, and host memory is kept ready for it.
bool Near(const Device::GpuMemory& gpu);
// Where data leaving place `from` goes: the other GPUs with room, the most
// first, then those whose memory this process cannot see (their reserve=
// check at commit refuses if another program took it), then host memory.
std::vector<size_t> MoveDestinations(absl::Span<const PlaceState> places, size_t from);
// Where data goes when room is made on GPUs on demand (a make-room, which
// may be emptying every GPU): host memory.
std::vector<size_t> RoomDestinations(absl::Span<const PlaceState> places);
// Where a file's blocks in host memory go back to (a shared mapping is GPU
// memory): its home first, then the other GPUs.
std::vector<size_t> ReturnDestinations(absl::Span<const PlaceState> places, size_t home);
// The host memory to keep ready: `asked` (spill_ready=) if given, else the
// reserves of the GPUs near theirs up to kNearReady; never more than the
// GPUs hold.
uint64_t ReadyTarget(absl::Span<const PlaceState> places, std::optional<uint64_t> asked,
                     uint64_t on_gpus);

}  // namespace placement
}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_PLACEMENT_RULES_H_
