// CudaDevice's data operations (cuda_device.h): checked against the arena,
// then handed to the scatter kernel or the copy streams.
#include <cstdint>
#include <optional>

#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

absl::Status CudaDevice::Write(absl::Span<const HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  if (std::optional<absl::Status> scattered = scatter_.TryWrite(
          copies, base_,
          [&](absl::Span<const HostToDevice> c) { return host_ranges_.AllPinned(c); })) {
    return *scattered;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const HostToDevice& c = copies[i];
    return CudaStreams::Transfer{base_ + c.device_offset,
                                 reinterpret_cast<cu::CUdeviceptr>(c.source), c.length};
  });
}

absl::Status CudaDevice::Read(absl::Span<const DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const DeviceToHost& c = copies[i];
    return CudaStreams::Transfer{reinterpret_cast<cu::CUdeviceptr>(c.destination),
                                 base_ + c.device_offset, c.length};
  });
}

absl::Status CudaDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.destination_offset, c.length); !s.ok()) return s;
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const DeviceToDevice& c = copies[i];
    return CudaStreams::Transfer{base_ + c.destination_offset, base_ + c.source_offset, c.length};
  });
}

absl::Status CudaDevice::Zero(absl::Span<const DeviceRange> ranges) {
  for (const DeviceRange& r : ranges) {
    if (absl::Status s = InRange(r.offset, r.length); !s.ok()) return s;
  }
  return streams_.Run("cuMemsetD8Async", ranges.size(), [&](size_t i, cu::CUstream stream) {
    return static_cast<int>(
        cu_.cuMemsetD8Async(base_ + ranges[i].offset, 0, ranges[i].length, stream));
  });
}

void* CudaDevice::AllocateHostBuffer(size_t length) {
  absl::MutexLock lock(&mu_);
  return host_ranges_.Allocate(length, EnterIfHeld());
}

void CudaDevice::FreeHostBuffer(void* buffer, size_t /*length*/) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Remove(buffer);
}

void CudaDevice::RegisterHostMemory(void* memory, size_t length) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Register(memory, length, EnterIfHeld());
}

void CudaDevice::UnregisterHostMemory(void* memory) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Remove(memory);
}

}  // namespace cudafs
