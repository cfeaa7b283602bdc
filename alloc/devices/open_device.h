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

// kCuda: the GPU named by `device_spec` (index or PCI bus id, empty = 0), or
// an error saying why it cannot be used (no driver, no device, no such
// device); it releases its context once nothing has been stored for
// `gpu_idle` (see CudaDevice). kHost: host memory. kAuto: the GPU when
// usable, else host memory with a notice. kNull: a NullDevice (benchmarks
// only) sized like kHost.
absl::StatusOr<OpenedDevice> OpenDevice(BackendKind kind, absl::string_view device_spec,
                                        absl::Duration gpu_idle, const ArenaSizer& arena_size);

// Bytes of physical host memory (the host backend's "device memory").
uint64_t HostMemoryBytes();

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_OPEN_DEVICE_H_
