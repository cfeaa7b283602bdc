// Picks and opens the Device behind a mount: `backend=auto|cuda|host`.
#ifndef CUDAFS_ALLOC_DEVICES_OPEN_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_OPEN_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "alloc/devices/device.h"

namespace cudafs {

enum class BackendKind { kAuto, kCuda, kHost, kNull };

struct OpenedDevice {
  std::unique_ptr<Device> device;
  // For backend=auto without a usable GPU: the one-line notice to print.
  std::string notice;
};

// Decides the arena size once the device's total memory is known (size=N%
// needs it); an error refuses the mount.
using ArenaSizer = std::function<absl::StatusOr<uint64_t>(uint64_t device_memory)>;

struct DeviceRequest {
  BackendKind kind = BackendKind::kAuto;
  // device=: empty (the first GPU), "all", or GPU indices and PCI bus ids
  // joined by '+' (see ResolveCudaDevices). Several make one pool
  // (PooledDevice) whose memory is the sum of theirs.
  std::string gpus;
  // How long a GPU's context outlives the last thing stored on it.
  absl::Duration gpu_idle = absl::Seconds(5);
  // Given the memory of all the GPUs (or host memory), the mount's size.
  ArenaSizer arena_size;
  // reserve=: given one GPU's memory, the bytes of it kept free.
  std::function<uint64_t(uint64_t device_memory)> reserve;
  // spill=: given the host's memory, how much of it may hold data moved
  // off the GPUs (a spill member after them: PooledDevice); 0 or empty:
  // none.
  std::function<uint64_t(uint64_t host_memory)> spill;
};

// kCuda: the GPUs `request` names, or an error saying why they cannot be
// used (no driver, no device, no such device); each releases its context
// once nothing has been stored on it for `gpu_idle` (see CudaDevice).
// kHost: host memory. kAuto: the GPUs when usable, else host memory with a
// notice. kNull: a NullDevice (benchmarks only) sized like kHost.
absl::StatusOr<OpenedDevice> OpenDevice(const DeviceRequest& request);

// Bytes of physical host memory (the host backend's "device memory").
uint64_t HostMemoryBytes();

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_OPEN_DEVICE_H_
