// CudaDevice's host memory (cuda_device.h): buffers and registered ranges
// pinned while a context lives, so that copies from them run at PCIe speed.
#include <sys/mman.h>

#include <cstdint>

#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/sorted_ranges.h"

namespace cudafs {

bool CudaDevice::Pin(void* memory, size_t length) {
  // Portable: the scatter kernel and the copy engines reach it under any
  // context; a failure only costs speed (the driver stages pageable memory).
  const CUresult result = cu_.cuMemHostRegister(memory, length, CU_MEMHOSTREGISTER_PORTABLE);
  // Another GPU of a pool pinned it first: copies run at full speed while
  // it keeps it, and this device does not count on it (no scatter kernel
  // reads it), since that GPU's context may go first.
  if (result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) return false;
  return Check("cuMemHostRegister", result).ok();
}

void* CudaDevice::AllocateHostBuffer(size_t length) {
  // Plain memory, pinned while a context lives: the buffer outlives the
  // contexts (the page cache's frames live as long as the mount).
  void* buffer = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return nullptr;
  absl::MutexLock lock(&mu_);
  const bool registered = context_.load() != nullptr && Enter().ok() && Pin(buffer, length);
  absl::MutexLock hosts(&host_buffers_mu_);
  host_ranges_.emplace(reinterpret_cast<uintptr_t>(buffer), HostRange{length, true, registered});
  return buffer;
}

void CudaDevice::FreeHostBuffer(void* buffer, size_t length) {
  UnregisterHostMemory(buffer);
  munmap(buffer, length);
}

void CudaDevice::RegisterHostMemory(void* memory, size_t length) {
  absl::MutexLock lock(&mu_);
  const bool registered = context_.load() != nullptr && Enter().ok() && Pin(memory, length);
  absl::MutexLock hosts(&host_buffers_mu_);
  host_ranges_.emplace(reinterpret_cast<uintptr_t>(memory), HostRange{length, false, registered});
}

void CudaDevice::UnregisterHostMemory(void* memory) {
  absl::MutexLock lock(&mu_);
  absl::MutexLock hosts(&host_buffers_mu_);
  auto it = host_ranges_.find(reinterpret_cast<uintptr_t>(memory));
  if (it == host_ranges_.end()) return;
  if (it->second.registered) {
    cu_.cuCtxSetCurrent(context_.load());
    (void)cu_.cuMemHostUnregister(memory);
  }
  host_ranges_.erase(it);
}

bool CudaDevice::InPinnedBuffer(const void* memory, size_t length) {
  const auto start = reinterpret_cast<uintptr_t>(memory);
  auto it = Containing(host_ranges_, start, [](const HostRange& range) { return range.length; });
  return it != host_ranges_.end() && it->second.registered &&
         start + length <= it->first + it->second.length;
}

}  // namespace cudafs
