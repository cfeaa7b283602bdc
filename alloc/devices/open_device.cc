#include "alloc/devices/open_device.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/null_device.h"
#include "alloc/devices/pooled_device.h"

namespace cudafs {

uint64_t HostMemoryBytes() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

namespace {

absl::StatusOr<OpenedDevice> OpenHost(const ArenaSizer& arena_size) {
  absl::StatusOr<uint64_t> size = arena_size(HostMemoryBytes());
  if (!size.ok()) return size.status();
  absl::StatusOr<std::unique_ptr<HostDevice>> device = HostDevice::Create(*size);
  if (!device.ok()) return device.status();
  return OpenedDevice{std::move(*device), ""};
}

absl::StatusOr<OpenedDevice> OpenCuda(const DeviceRequest& request) {
  absl::StatusOr<std::vector<int>> indices = ResolveCudaDevices(request.gpus);
  if (!indices.ok()) return indices.status();
  std::vector<uint64_t> memory;
  uint64_t all_memory = 0;
  for (const int index : *indices) {
    absl::StatusOr<uint64_t> total = CudaTotalMemory(index);
    if (!total.ok()) return total.status();
    memory.push_back(*total);
    all_memory += *total;
  }
  absl::StatusOr<uint64_t> size = request.arena_size(all_memory);
  if (!size.ok()) return size.status();
  std::vector<std::unique_ptr<Device>> gpus;
  for (size_t i = 0; i < indices->size(); ++i) {
    const CudaDeviceOptions options{
        .idle_release = request.gpu_idle,
        .reserve_bytes = request.reserve ? request.reserve(memory[i]) : 0};
    if (options.reserve_bytes >= memory[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reserve= of ", options.reserve_bytes, " bytes leaves nothing of GPU ", (*indices)[i],
          " (", memory[i], " bytes)"));
    }
    // In a pool each GPU may hold up to the whole size (the Arena bounds
    // the sum): files go where there is room.
    const uint64_t arena = indices->size() == 1 ? *size : std::min(*size, memory[i]);
    absl::StatusOr<std::unique_ptr<CudaDevice>> gpu =
        CudaDevice::Create((*indices)[i], arena, options);
    if (!gpu.ok()) return gpu.status();
    gpus.push_back(std::move(*gpu));
  }
  std::unique_ptr<Device> spill;
  if (const uint64_t spill_bytes = request.spill ? request.spill(HostMemoryBytes()) : 0;
      spill_bytes > 0) {
    absl::StatusOr<std::unique_ptr<HostDevice>> host =
        HostDevice::Create(spill_bytes, HostDevice::Backing::kHugePages);
    if (!host.ok()) return host.status();
    spill = std::move(*host);
  }
  if (gpus.size() == 1 && spill == nullptr) return OpenedDevice{std::move(gpus.front()), ""};
  if (spill != nullptr && spill->granule_size() != gpus.front()->granule_size()) {
    // Blocks could not move between the two.
    return absl::InvalidArgumentError(absl::StrCat(
        gpus.front()->Describe(), " backs memory in units of ", gpus.front()->granule_size(),
        " bytes, host memory in units of ", spill->granule_size(),
        ": data cannot move between them; mount with spill=0"));
  }
  absl::StatusOr<std::unique_ptr<PooledDevice>> pool =
      PooledDevice::Create(std::move(gpus), std::move(spill));
  if (!pool.ok()) return pool.status();
  return OpenedDevice{std::move(*pool), ""};
}

}  // namespace

absl::StatusOr<OpenedDevice> OpenDevice(const DeviceRequest& request) {
  switch (request.kind) {
    case BackendKind::kHost:
      return OpenHost(request.arena_size);
    case BackendKind::kCuda:
      return OpenCuda(request);
    case BackendKind::kNull: {
      absl::StatusOr<uint64_t> size = request.arena_size(HostMemoryBytes());
      if (!size.ok()) return size.status();
      return OpenedDevice{std::make_unique<NullDevice>(*size), ""};
    }
    case BackendKind::kAuto:
      break;
  }
  absl::StatusOr<OpenedDevice> cuda = OpenCuda(request);
  if (cuda.ok()) return cuda;
  // A bad size= or a device= naming a GPU that does not exist is the
  // user's mistake on any backend: report it, don't fall back.
  if (absl::IsInvalidArgument(cuda.status())) return cuda.status();
  absl::StatusOr<OpenedDevice> host = OpenHost(request.arena_size);
  if (!host.ok()) return host.status();
  host->notice = absl::StrCat("cudafs: no usable GPU (", cuda.status().message(),
                              "); storing files in host memory");
  return host;
}

}  // namespace cudafs
