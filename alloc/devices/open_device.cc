#include "alloc/devices/open_device.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "alloc/devices/host_device.h"
#include "alloc/devices/null_device.h"
#ifdef CUDAFS_WITH_CUDA
#include "alloc/devices/cuda_device.h"
#endif

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

absl::StatusOr<OpenedDevice> OpenCuda(absl::string_view device_spec, absl::Duration gpu_idle,
                                      const ArenaSizer& arena_size) {
#ifdef CUDAFS_WITH_CUDA
  absl::StatusOr<int> index = ResolveCudaDevice(device_spec);
  if (!index.ok()) return index.status();
  absl::StatusOr<uint64_t> memory = CudaTotalMemory(*index);
  if (!memory.ok()) return memory.status();
  absl::StatusOr<uint64_t> size = arena_size(*memory);
  if (!size.ok()) return size.status();
  absl::StatusOr<std::unique_ptr<CudaDevice>> device =
      CudaDevice::Create(*index, *size, CudaDeviceOptions{.idle_release = gpu_idle});
  if (!device.ok()) return device.status();
  return OpenedDevice{std::move(*device), ""};
#else
  (void)device_spec, (void)gpu_idle, (void)arena_size;
  return absl::UnavailableError("this cudafs was built without the CUDA device");
#endif
}

}  // namespace

absl::StatusOr<OpenedDevice> OpenDevice(BackendKind kind, absl::string_view device_spec,
                                        absl::Duration gpu_idle, const ArenaSizer& arena_size) {
  switch (kind) {
    case BackendKind::kHost:
      return OpenHost(arena_size);
    case BackendKind::kCuda:
      return OpenCuda(device_spec, gpu_idle, arena_size);
    case BackendKind::kNull: {
      absl::StatusOr<uint64_t> size = arena_size(HostMemoryBytes());
      if (!size.ok()) return size.status();
      return OpenedDevice{std::make_unique<NullDevice>(*size), ""};
    }
    case BackendKind::kAuto:
      break;
  }
  absl::StatusOr<OpenedDevice> cuda = OpenCuda(device_spec, gpu_idle, arena_size);
  if (cuda.ok()) return cuda;
  // A bad size= or a device= naming a GPU that does not exist is the
  // user's mistake on any backend: report it, don't fall back.
  if (absl::IsInvalidArgument(cuda.status())) return cuda.status();
  absl::StatusOr<OpenedDevice> host = OpenHost(arena_size);
  if (!host.ok()) return host.status();
  host->notice = absl::StrCat("cudafs: no usable GPU (", cuda.status().message(),
                              "); storing files in host memory");
  return host;
}

}  // namespace cudafs
