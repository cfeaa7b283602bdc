// FreeVram: what the driver reports free on a GPU, for the tests that check
// that device memory follows what is stored.
#ifndef CUDAFS_TESTS_SUPPORT_FREE_VRAM_H_
#define CUDAFS_TESTS_SUPPORT_FREE_VRAM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "alloc/devices/cuda_device.h"

namespace cudafs {

// Free VRAM on GPU `index` as the driver reports it to this process; 0 when
// there is no such GPU.
inline uint64_t FreeVram(int index) {
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ListCudaDevices();
  if (!devices.ok() || static_cast<size_t>(index) >= devices->size()) return 0;
  return (*devices)[index].free_bytes;
}

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_FREE_VRAM_H_
