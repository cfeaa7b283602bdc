#include "fs/daemon/list_devices_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "fs/daemon/command_failure.h"

namespace cudafs {

int ListDevicesCommand() {
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices();
  // Without a GPU a mount still works, from host memory: say so, so that
  // the exit status reads as "no GPU here", not "cudafs cannot run here".
  if (!devices.ok()) {
    return Fail(absl::StrCat("no GPU to use: ", devices.status().message(),
                             "; mounts will keep file data in host memory"));
  }
  std::printf("%-5s %-32s %-14s %12s %12s\n", "INDEX", "NAME", "PCI BUS ID", "TOTAL MiB",
              "FREE MiB");
  for (const CudaDeviceInfo& device : *devices) {
    std::printf("%-5d %-32s %-14s %12llu %12llu\n", device.index, device.name.c_str(),
                device.pci_bus_id.c_str(),
                static_cast<unsigned long long>(device.total_bytes >> 20),
                static_cast<unsigned long long>(device.free_bytes >> 20));
  }
  return 0;
}

}  // namespace cudafs
