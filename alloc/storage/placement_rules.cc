#include "alloc/storage/placement_rules.h"

#include <algorithm>
#include <tuple>

namespace cudafs::placement {

size_t GpuCount(absl::Span<const PlaceState> places) {
  return static_cast<size_t>(
      std::find_if(places.begin(), places.end(), [](const PlaceState& p) { return p.spill; }) -
      places.begin());
}

size_t Home(absl::Span<const PlaceState> places) {
  size_t home = 0;
  uint64_t most = 0;
  for (size_t p = 0; p < places.size(); ++p) {
    if (!places[p].spill && !places[p].held_back && places[p].free > most) {
      most = places[p].free, home = p;
    }
  }
  return home;
}

size_t Stripe(size_t home, uint64_t offset, uint64_t size, uint64_t max_extent, size_t gpus) {
  if (size < max_extent || home >= gpus) return home;
  return (home + offset / max_extent) % gpus;
}

std::vector<size_t> Fallbacks(absl::Span<const PlaceState> places, std::optional<size_t> tried) {
  std::vector<std::tuple<int, uint64_t, size_t>> ranked;  // rank, free bytes, part
  for (size_t p = 0; p < places.size(); ++p) {
    if (p == tried) continue;
    const int rank = places[p].held_back ? 0 : places[p].spill ? 1 : 2;
    ranked.emplace_back(rank, places[p].free, p);
  }
  std::sort(ranked.rbegin(), ranked.rend());
  std::vector<size_t> order;
  for (const auto& [rank, free, part] : ranked) order.push_back(part);
  return order;
}

uint64_t Margin(const Device::GpuMemory& gpu) { return gpu.reserve / 2; }

uint64_t Excess(const Device::GpuMemory& gpu) {
  return gpu.free < gpu.reserve ? gpu.reserve - gpu.free + Margin(gpu) : 0;
}

uint64_t Room(const Device::GpuMemory& gpu) {
  const uint64_t kept = gpu.reserve + Margin(gpu);
  return gpu.free > kept ? gpu.free - kept : 0;
}

bool Near(const Device::GpuMemory& gpu) { return gpu.free < 2 * gpu.reserve; }

std::vector<size_t> MoveDestinations(absl::Span<const PlaceState> places, size_t from) {
  std::vector<std::tuple<bool, uint64_t, size_t>> gpus;  // seen, room, part
  for (size_t p = 0; p < GpuCount(places); ++p) {
    if (p == from) continue;
    if (!places[p].gpu) {
      gpus.emplace_back(false, 0, p);
    } else if (const uint64_t room = Room(*places[p].gpu); room > 0) {
      gpus.emplace_back(true, places[p].gpu->free - places[p].gpu->reserve, p);
    }
  }
  std::sort(gpus.rbegin(), gpus.rend());
  std::vector<size_t> order;
  for (const auto& [seen, room, part] : gpus) order.push_back(part);
  for (size_t p = GpuCount(places); p < places.size(); ++p) order.push_back(p);
  return order;
}

std::vector<size_t> RoomDestinations(absl::Span<const PlaceState> places) {
  std::vector<size_t> order;
  for (size_t p = GpuCount(places); p < places.size(); ++p) order.push_back(p);
  return order;
}

std::vector<size_t> ReturnDestinations(absl::Span<const PlaceState> places, size_t home) {
  const size_t gpus = GpuCount(places);
  std::vector<size_t> order;
  if (home < gpus) order.push_back(home);
  for (size_t p = 0; p < gpus; ++p) {
    if (p != home) order.push_back(p);
  }
  return order;
}

uint64_t ReadyTarget(absl::Span<const PlaceState> places, std::optional<uint64_t> asked,
                     uint64_t on_gpus) {
  uint64_t near = 0;
  for (const PlaceState& place : places) {
    if (place.gpu && Near(*place.gpu)) near += place.gpu->reserve;
  }
  return std::min(asked.value_or(std::min(near, kNearReady)), on_gpus);
}

}  // namespace cudafs::placement
