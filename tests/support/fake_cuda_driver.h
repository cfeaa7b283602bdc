// FakeCudaDriver: the CUDA Driver API emulated in host memory, so that code
// built on CudaDriver (CudaDevice) runs and is checked where there is no GPU
// (CI).
//
// One fake GPU, device 0, or several (ordinals 0..N-1), with virtual memory
// management. Device addresses are host addresses: a reservation is a
// PROT_NONE host range and physical memory a memfd mapped into it, so a
// test may read device memory directly and data survives unmap and remap as
// in VRAM. Copies run at enqueue; the scatter kernel (scatter_kernel.h) runs
// on the CPU.
//
// Each GPU has its own primary context, its own memory limit and its own
// injected failures. Physical memory is on the device its
// CUmemAllocationProp names and counts against that device's limit, but
// belongs, as everything else made through a context (reservations,
// streams, modules, host memory), to the context current when it was made:
// destroying that context frees it. Addresses are unified: any context may
// map, copy and run kernels on memory of any device, as long as
// cuMemSetAccess granted the current context's device access to it (peer
// access, always possible here).
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
//    made accessible to the current context's device fails with
//    CUDA_ERROR_ILLEGAL_ADDRESS, which is sticky for the context, as on a
//    GPU; so is an injected sticky error (FailNext), for the context of the
//    device the call was made on;
//  - streams, modules and functions work only in the context that made
//    them; host memory registered or allocated without the PORTABLE flag is
//    addressable by kernels only there; host ranges are registered once for
//    the whole process, as in the driver.
//
// Besides what the daemon uses, it serves what the client library adds
// (cuCtxGetCurrent, cuCtxGetDevice, cuDeviceCanAccessPeer: any two devices
// reach each other) and the calls a GPU program allocates
// with (fake_cuda_program_api.h: cuMemAlloc, cuMemAllocPitch,
// cuMemAllocManaged, cuMemAllocAsync, cuMemAllocFromPoolAsync with the
// device's default pool, their frees; cuCtxSynchronize). That memory is
// host memory at its device address,
// counts against its device's memory like cuMemCreate's (managed memory
// included, as if all of it were on the GPU), is freed at once by the
// asynchronous frees, and belongs to the context of its device. There is
// one context a device, the primary one: no cuCtxCreate.
//
// With ShareMemory, the devices' memory is shared with other processes
// that use the same state file (fake_cuda_shared_budget.h): what any of
// them holds is not free for the others. Exported memory is a memfd named
// for its device, which another process's fake imports too (the daemon's
// and its clients', each with the fake as libcuda.so.1), counted on the
// exporter's side only.
#ifndef CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_
#define CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "alloc/devices/cuda_driver.h"
#include "tests/support/fake_cuda_shared_budget.h"

namespace cudafs {

struct FakeGpuOptions {
  std::string name = "Fake GPU";
  std::string pci_bus_id = "0000:65:00.0";  // as cuDeviceGetPCIBusId writes it
  uint64_t total_bytes = uint64_t{8} << 30;
  // Allocations (cuMemCreate, cuMemAlloc...) fail with
  // CUDA_ERROR_OUT_OF_MEMORY beyond this many bytes live on the device (or
  // total_bytes, whichever is less), other programs' included
  // (set_used_by_others, ShareMemory).
  uint64_t vram_limit = UINT64_MAX;
};

namespace fake_cuda_internal {
class State;
}  // namespace fake_cuda_internal

class FakeCudaDriver {
 public:
  // Installs the fake for the whole process: only one may exist at a time.
  // One GPU.
  explicit FakeCudaDriver(FakeGpuOptions options = {});
  // gpus[i] is device i. At least one; their pci_bus_ids must differ.
  explicit FakeCudaDriver(std::vector<FakeGpuOptions> gpus);
  // Frees everything the fake still holds (contexts, memory, mappings).
  // Handles made by it stay invalid for any later fake.
  ~FakeCudaDriver();

  FakeCudaDriver(const FakeCudaDriver&) = delete;
  FakeCudaDriver& operator=(const FakeCudaDriver&) = delete;

  // What cuDriverGetVersion says unless set_driver_version changes it.
  static constexpr int kDriverVersion = 13000;

  // Every entry point, the optional ones included, set to the fake's:
  // resolved by CudaDriver::Resolve through get_proc_address() when the
  // fake was made.
  const CudaDriver& driver() const { return driver_; }

  // The fake's cuGetProcAddress (the _v2 form), for CudaDriver::Resolve.
  // It hands out each entry point only at the version cuda_api.h declares
  // it (another version dies: a real driver would hand out another ABI),
  // fails with CUDA_ERROR_INVALID_VALUE for a version beyond the driver's,
  // as the driver documents, and says CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  // for a name it does not know. It serves fake_cuda_program_api.h's entry
  // points too, at their versions there.
  static cu::cuGetProcAddress_t get_proc_address();

  // Counts the devices' memory in `budget` from now on (made for as many
  // devices as this fake has), with every process sharing it. Before any
  // memory is made.
  void ShareMemory(std::unique_ptr<FakeCudaSharedBudget> budget);

  // What cuDriverGetVersion says and get_proc_address() serves up to, as
  // an older driver would (driver() stays as it was resolved).
  void set_driver_version(int version);

  // The next `count` calls of `entry_point` ("cuMemCreate": the names of
  // CUDAFS_CUDA_ENTRY_POINTS) return `result` without doing anything;
  // kAlways: every call from now on; 0: none (cancels). A sticky error
  // (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED...) also makes
  // the primary context of the call's device unusable until destroyed.
  static constexpr int kAlways = -1;
  void FailNext(absl::string_view entry_point, cu::CUresult result, int count = 1);
  // The same, counting only calls made on `device`: those naming it (a
  // device, ordinal, memory location, bus id or context argument) and,
  // for the others, those made with one of its contexts current. A call
  // on `device` takes a failure set so before one set for any device.
  void FailNext(absl::string_view entry_point, cu::CUresult result, int count, int device);

  // Changes FakeGpuOptions::vram_limit of device 0, or of `device`; memory
  // already made stays.
  void set_vram_limit(uint64_t bytes);
  void set_vram_limit(int device, uint64_t bytes);
  // Simulates other programs holding `bytes` of the device: they count
  // against the allocations' limit and are not free for cuMemGetInfo.
  void set_used_by_others(int device, uint64_t bytes);

  // For one device, physical allocations are those on it (the location
  // cuMemCreate was given) and mapped_bytes the mappings of its memory;
  // everything else is what was made under its contexts.
  struct Stats {
    int contexts_created = 0;
    int live_contexts = 0;  // 0 or 1 a device: its primary context
    int live_streams = 0;
    int live_modules = 0;
    int live_physical_allocations = 0;  // made by cuMemCreate, not yet freed
    uint64_t physical_bytes = 0;        // their size
    uint64_t mapped_bytes = 0;
    uint64_t reserved_bytes = 0;
    uint64_t pinned_host_bytes = 0;      // cuMemHostAlloc
    uint64_t registered_host_bytes = 0;  // cuMemHostRegister
    // cuMemAlloc and the other allocations of fake_cuda_program_api.h on
    // the device, not yet freed.
    int live_linear_allocations = 0;
    uint64_t linear_bytes = 0;
    // Streams, modules, physical allocations, reservations, pinned and
    // registered host memory still alive when a context was destroyed.
    int leaked_at_destroy = 0;
    uint64_t largest_create = 0;  // the largest size cuMemCreate was asked for
    // Copies made in its context whose host memory (source or destination)
    // the context does not hold pinned: pageable, or registered only
    // without PORTABLE by another context. The driver stages those.
    int pageable_host_copies = 0;
  };
  // The sum over all devices (largest_create: the largest of theirs).
  Stats stats() const;
  Stats stats(int device) const;

  // How many times `entry_point` was called, failed calls included.
  int calls(absl::string_view entry_point) const;

  // Runs `hook` at the start of every call of `entry_point`, before the
  // fake looks at anything and outside its lock, so that a test may hold
  // a call there (and the caller with whatever it holds); null removes it.
  void OnCall(absl::string_view entry_point, std::function<void()> hook);

 private:
  std::unique_ptr<fake_cuda_internal::State> state_;
  CudaDriver driver_;
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_FAKE_CUDA_DRIVER_H_
