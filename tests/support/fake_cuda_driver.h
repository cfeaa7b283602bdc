// FakeCudaDriver: the CUDA Driver API emulated in host memory, so that code
// built on CudaDriver (CudaDevice) runs and is checked where there is no GPU
// (CI).
//
// One fake GPU, device 0, with virtual memory management. Device addresses
// are host addresses: a reservation is a PROT_NONE host range and physical
// memory a memfd mapped into it, so a test may read device memory directly
// and data survives unmap and remap as in VRAM. Copies run at enqueue; the
// scatter kernel (scatter_kernel.h) runs on the CPU.
//
// The fake is strict where the real driver would fail or crash later:
//  - calls that need a current context (cuMemGetInfo, cuMemAddressReserve,
//    cuMemCreate, host memory, streams, modules, copies, launches) fail
//    with CUDA_ERROR_INVALID_CONTEXT when the thread has none and
//    CUDA_ERROR_CONTEXT_IS_DESTROYED when its context is gone. Device and
//    granularity queries need none, nor do cuMemMap, cuMemSetAccess,
//    cuMemUnmap, cuMemRelease and cuMemAddressFree (the driver documents
//    no CUDA_ERROR_INVALID_CONTEXT for them); cuMemCreate does here, though
//    not documented so, because the fake ties memory to a context;
//  - the primary context lives from its first retain to its last release;
//    destroying it frees all made under it, counting each as a leak, and a
//    later retain makes a context with a new handle (the real driver reuses
//    the handle: code that works here works there, not the reverse);
//  - a copy or launch touching device addresses that are not mapped and
//    made accessible fails with CUDA_ERROR_ILLEGAL_ADDRESS, which is sticky
//    for the context, as on a GPU.
#ifndef CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_
#define CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

struct FakeGpuOptions {
  std::string name = "Fake GPU";
  std::string pci_bus_id = "0000:65:00.0";  // as cuDeviceGetPCIBusId writes it
  uint64_t total_bytes = uint64_t{8} << 30;
  // cuMemCreate fails with CUDA_ERROR_OUT_OF_MEMORY beyond this many bytes
  // live (or total_bytes, whichever is less).
  uint64_t vram_limit = UINT64_MAX;
};

namespace fake_cuda_internal {
class State;
}  // namespace fake_cuda_internal

class FakeCudaDriver {
 public:
  // Installs the fake for the whole process: only one may exist at a time.
  explicit FakeCudaDriver(FakeGpuOptions options = {});
  // Frees everything the fake still holds (contexts, memory, mappings).
  // Handles made by it stay invalid for any later fake.
  ~FakeCudaDriver();

  FakeCudaDriver(const FakeCudaDriver&) = delete;
  FakeCudaDriver& operator=(const FakeCudaDriver&) = delete;

  // Every entry point, the optional ones included, set to the fake's.
  const CudaDriver& driver() const { return driver_; }

  // The next `count` calls of `entry_point` ("cuMemCreate": the names of
  // CUDAFS_CUDA_ENTRY_POINTS) return `result` without doing anything;
  // kAlways: every call from now on; 0: none (cancels).
  static constexpr int kAlways = -1;
  void FailNext(absl::string_view entry_point, CUresult result, int count = 1);

  // Changes FakeGpuOptions::vram_limit; memory already made stays.
  void set_vram_limit(uint64_t bytes);

  struct Stats {
    int contexts_created = 0;
    int live_contexts = 0;  // 0 or 1: the primary context
    int live_streams = 0;
    int live_modules = 0;
    int live_physical_allocations = 0;  // made by cuMemCreate, not yet freed
    uint64_t physical_bytes = 0;        // their size
    uint64_t mapped_bytes = 0;
    uint64_t reserved_bytes = 0;
    uint64_t pinned_host_bytes = 0;      // cuMemHostAlloc
    uint64_t registered_host_bytes = 0;  // cuMemHostRegister
    // Streams, modules, physical allocations, reservations, pinned and
    // registered host memory still alive when a context was destroyed.
    int leaked_at_destroy = 0;
    uint64_t largest_create = 0;  // the largest size cuMemCreate was asked for
  };
  Stats stats() const;

  // How many times `entry_point` was called, failed calls included.
  int calls(absl::string_view entry_point) const;

 private:
  std::unique_ptr<fake_cuda_internal::State> state_;
  CudaDriver driver_;
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_
