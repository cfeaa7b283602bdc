#include "alloc/devices/cuda_host_memory.h"

#include <sys/mman.h>

#include "alloc/devices/cuda_context.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/sorted_ranges.h"

namespace cudafs {

PinnedHostRanges::~PinnedHostRanges() {
  absl::MutexLock lock(&mu_);
  for (const auto& [start, range] : ranges_) {
    if (range.owned) munmap(reinterpret_cast<void*>(start), range.length);
  }
}

bool PinnedHostRanges::Pin(void* memory, size_t length) const {
  // Portable: the scatter kernel and the copy engines reach it under any
  // context; a failure only costs speed (the driver stages pageable memory).
  const CUresult result =
      context_.driver().cuMemHostRegister(memory, length, CU_MEMHOSTREGISTER_PORTABLE);
  // Another GPU of a pool pinned it first: copies run at full speed while
  // it keeps it, and this device does not count on it (no scatter kernel
  // reads it), since that GPU's context may go first.
  if (result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) return false;
  return context_.Check("cuMemHostRegister", result).ok();
}

void* PinnedHostRanges::Allocate(size_t length, bool pin) {
  void* buffer = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return nullptr;
  const bool pinned = pin && Pin(buffer, length);
  absl::MutexLock lock(&mu_);
  ranges_.emplace(reinterpret_cast<uintptr_t>(buffer), Range{length, true, pinned});
  return buffer;
}

void PinnedHostRanges::Register(void* memory, size_t length, bool pin) {
  const bool pinned = pin && Pin(memory, length);
  absl::MutexLock lock(&mu_);
  ranges_.emplace(reinterpret_cast<uintptr_t>(memory), Range{length, false, pinned});
}

void PinnedHostRanges::Remove(void* memory) {
  absl::MutexLock lock(&mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(memory));
  if (it == ranges_.end()) return;
  if (it->second.pinned) {
    context_.MakeCurrent();
    (void)context_.driver().cuMemHostUnregister(memory);
  }
  if (it->second.owned) munmap(memory, it->second.length);
  ranges_.erase(it);
}

PinnedHostRanges::Pinned PinnedHostRanges::PinAll() {
  Pinned pinned;
  absl::MutexLock lock(&mu_);
  for (auto& [start, range] : ranges_) {
    range.pinned = Pin(reinterpret_cast<void*>(start), range.length);
    if (!range.pinned) continue;
    ++pinned.ranges;
    pinned.bytes += range.length;
  }
  return pinned;
}

void PinnedHostRanges::UnpinAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [start, range] : ranges_) {
    if (range.pinned) (void)context_.driver().cuMemHostUnregister(reinterpret_cast<void*>(start));
    range.pinned = false;
  }
}

bool PinnedHostRanges::AllPinned(absl::Span<const HostToDevice> copies) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const HostToDevice& c : copies) {
    const auto start = reinterpret_cast<uintptr_t>(c.source);
    auto it = Containing(ranges_, start, [](const Range& range) { return range.length; });
    if (it == ranges_.end() || !it->second.pinned ||
        start + c.length > it->first + it->second.length) {
      return false;
    }
  }
  return true;
}

}  // namespace cudafs
