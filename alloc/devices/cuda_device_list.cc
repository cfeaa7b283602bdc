// Finding GPUs (cuda_device.h): the list, device= values, total memory.
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {
namespace {

absl::StatusOr<int> DeviceCount(const CudaDriver& cu) {
  int count = 0;
  if (absl::Status s = cu.Check("cuDeviceGetCount", cu.cuDeviceGetCount(&count)); !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  if (count == 0) return absl::UnavailableError("the NVIDIA driver sees no GPU");
  return count;
}

}  // namespace

absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices() {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  absl::StatusOr<int> count = DeviceCount(cu);
  if (!count.ok()) return count.status();
  std::vector<CudaDeviceInfo> devices;
  for (int index = 0; index < *count; ++index) {
    cu::CUdevice device;
    if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) {
      return s;
    }
    CudaDeviceInfo info;
    info.index = index;
    info.name = cu.DeviceName(device);
    info.pci_bus_id = cu.PciBusId(device);
    size_t total = 0;
    if (absl::Status s = cu.Check("cuDeviceTotalMem", cu.cuDeviceTotalMem(&total, device));
        !s.ok()) {
      return s;
    }
    info.total_bytes = total;
    // Free memory is a property of a context: borrow the primary one.
    cu::CUcontext context;
    if (cu.cuDevicePrimaryCtxRetain(&context, device) == cu::CUDA_SUCCESS) {
      size_t free = 0;
      if (cu.cuCtxSetCurrent(context) == cu::CUDA_SUCCESS &&
          cu.cuMemGetInfo(&free, &total) == cu::CUDA_SUCCESS) {
        info.free_bytes = free;
      }
      cu.cuCtxSetCurrent(nullptr);
      cu.cuDevicePrimaryCtxRelease(device);
    }
    devices.push_back(std::move(info));
  }
  return devices;
}

namespace {

// One GPU of a device= list: an index or a PCI bus id (the driver accepts
// "domain:bus:device.function" and "bus:device.function").
absl::StatusOr<int> ResolveOne(const CudaDriver& cu, int count, absl::string_view item) {
  int index;
  if (absl::SimpleAtoi(item, &index)) {
    if (index < 0 || index >= count) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device=%s: GPU %d does not exist (this machine has %d: 0..%d)", item,
                          index, count, count - 1));
    }
    return index;
  }
  const std::string bus_id(item);
  cu::CUdevice device;
  if (cu.cuDeviceGetByPCIBusId(&device, bus_id.c_str()) != cu::CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device=%s: no GPU with that PCI bus id (see cudafs --list-devices)", item));
  }
  // CUdevice values are the ordinals the driver counts from 0.
  return static_cast<int>(device);
}

}  // namespace

absl::StatusOr<std::vector<int>> ResolveCudaDevices(const CudaDriver& cu, absl::string_view spec) {
  absl::StatusOr<int> count = DeviceCount(cu);
  if (!count.ok()) return count.status();
  if (spec.empty()) return std::vector<int>{0};
  std::vector<int> indices;
  if (spec == "all") {
    for (int i = 0; i < *count; ++i) indices.push_back(i);
    return indices;
  }
  for (absl::string_view item : absl::StrSplit(spec, absl::ByAnyChar("+,"))) {
    absl::StatusOr<int> index = ResolveOne(cu, *count, item);
    if (!index.ok()) return index.status();
    if (absl::c_linear_search(indices, *index)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device=%s names GPU %d twice", spec, *index));
    }
    indices.push_back(*index);
  }
  return indices;
}

absl::StatusOr<std::vector<int>> ResolveCudaDevices(absl::string_view spec) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  return ResolveCudaDevices(**driver, spec);
}

absl::StatusOr<uint64_t> CudaTotalMemory(int index) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  cu::CUdevice device;
  if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) return s;
  size_t total = 0;
  if (absl::Status s = cu.Check("cuDeviceTotalMem", cu.cuDeviceTotalMem(&total, device)); !s.ok()) {
    return s;
  }
  return total;
}

}  // namespace cudafs
