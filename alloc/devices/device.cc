#include "alloc/devices/device.h"

#include <cstdlib>

namespace cudafs {
namespace {

thread_local bool background_thread = false;

}  // namespace

void MarkBackgroundThread() { background_thread = true; }

bool IsBackgroundThread() { return background_thread; }

std::vector<DeviceRange> Device::parts() const { return {{0, arena_size()}}; }

void* Device::AllocateHostBuffer(size_t length) {
  // Page alignment keeps O_DIRECT-style callers and vector copies happy.
  return std::aligned_alloc(4096, (length + 4095) & ~size_t{4095});
}

void Device::FreeHostBuffer(void* buffer, size_t /*length*/) { std::free(buffer); }

void Device::RegisterHostMemory(void* /*memory*/, size_t /*length*/) {}

void Device::UnregisterHostMemory(void* /*memory*/) {}

absl::StatusOr<std::vector<Device::CopyPiece>> Device::PlanCopy(
    uint64_t /*size*/, absl::Span<const DeviceToDevice> /*copies*/) const {
  return absl::UnimplementedError(Describe() + " cannot copy into other processes' memory");
}

absl::Status Device::FillCopy(absl::Span<const CopyMemory> /*memory*/,
                              absl::Span<const DeviceToDevice> /*copies*/) {
  return absl::UnimplementedError(Describe() + " cannot copy into other processes' memory");
}

bool Device::Exclusive(DeviceRange /*range*/) const { return false; }

absl::StatusOr<std::unique_ptr<ExportedMemory>> Device::ExportShared(
    uint64_t /*size*/, absl::Span<const DeviceRange> /*ranges*/) {
  return absl::UnimplementedError(Describe() + " cannot share memory with other processes");
}

}  // namespace cudafs
