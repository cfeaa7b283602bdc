#include "alloc/devices/device.h"

#include <cstdlib>

namespace cudafs {
namespace {

thread_local bool background_thread = false;

}  // namespace

void MarkBackgroundThread() { background_thread = true; }

bool IsBackgroundThread() { return background_thread; }

std::vector<DevicePart> Device::parts() const {
  return {{{0, arena_size()}, Describe(), place(), /*spill=*/false}};
}

void* Device::AllocateHostBuffer(size_t length) {
  // Page alignment keeps O_DIRECT-style callers and vector copies happy.
  return std::aligned_alloc(4096, (length + 4095) & ~size_t{4095});
}

void Device::FreeHostBuffer(void* buffer, size_t /*length*/) { std::free(buffer); }

void Device::RegisterHostMemory(void* /*memory*/, size_t /*length*/) {}

void Device::UnregisterHostMemory(void* /*memory*/) {}

}  // namespace cudafs
