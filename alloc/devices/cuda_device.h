// CudaDevice: the arena in NVIDIA GPU memory, taken on demand.
//
// The arena is a reserved range of GPU virtual addresses
// (cuMemAddressReserve) of the mount's size; Commit backs granules of it with
// physical VRAM (cuMemCreate + cuMemMap + cuMemSetAccess) and Decommit gives
// them back, so an empty mount holds almost no VRAM and nvidia-smi follows
// what is stored. Physical allocations request POSIX file-descriptor handles
// so that extents can later be shared with other processes.
//
// Copies run on a fixed pool of non-blocking streams: each batch borrows a
// stream, enqueues all of its copies and waits once, so concurrent FUSE
// requests overlap on the copy engines. Copies from buffers made by
// AllocateHostBuffer (pinned with cuMemHostAlloc) run at PCIe speed without
// staging; copies from other memory work too, through the driver's own
// staging.
//
// A write of many small pieces from buffers made by AllocateHostBuffer (a
// flush of scattered dirty pages) is one launch of the scatter kernel
// (scatter_kernel.h), which reads the pieces straight from that pinned
// memory, instead of one copy per piece.
//
// Errors: out of VRAM is ResourceExhausted (ENOSPC); any other CUDA error is
// logged once per call and returned as Internal (EIO). After a sticky error
// (the context is lost) every data operation fails at once with Internal;
// the process keeps running so that the mount can still be unmounted.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device.h"

// The driver's opaque handle types, declared here so that only the .cc
// files include <cuda.h>.
struct CUctx_st;
struct CUstream_st;
struct CUmod_st;
struct CUfunc_st;

namespace cudafs {

struct CudaDriver;

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:65:00.0"
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// Every GPU the driver sees, with free memory (creates each device's
// context). Unavailable when no driver or no device.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

// `spec` is empty (device 0), an index ("1") or a PCI bus id
// ("0000:65:00.0", "65:00.0"). Unavailable when there is no driver or GPU;
// InvalidArgument when the GPU named does not exist.
absl::StatusOr<int> ResolveCudaDevice(absl::string_view spec);

// Total memory of GPU `index`, without creating a context.
absl::StatusOr<uint64_t> CudaTotalMemory(int index);

class CudaDevice final : public Device {
 public:
  // An arena of `arena_size` bytes (rounded up to the allocation granule) on
  // GPU `index`. Fails with Unavailable when the GPU lacks the virtual
  // memory management API.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int index, uint64_t arena_size);
  ~CudaDevice() override;

  std::string Describe() const override;
  uint64_t arena_size() const override { return arena_size_; }
  uint64_t granule_size() const override { return granule_; }
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;
  // What one launch of the scatter kernel takes.
  size_t max_batch_copies() const override { return kScatterMaxPieces; }
  void* AllocateHostBuffer(size_t length) override;
  void FreeHostBuffer(void* buffer, size_t length) override;
  void RegisterHostMemory(void* memory, size_t length) override;
  void UnregisterHostMemory(void* memory) override;

  // Writes that went through the scatter kernel so far.
  uint64_t scattered_writes() const { return scattered_writes_.load(); }

 private:
  // The granule-sized physical allocation mapped at an arena offset.
  using PhysicalHandle = unsigned long long;  // CUmemGenericAllocationHandle

  CudaDevice(const CudaDriver& driver, uint64_t granule);

  // Makes our context current on the calling thread (FUSE worker threads
  // are not ours) and fails fast once the context is lost.
  absl::Status Enter() const;
  // Turns a CUresult into a Status, logging failures and noting sticky ones.
  absl::Status Check(absl::string_view call, int result) const;
  // Runs `enqueue` for each element on a borrowed stream, then waits once.
  absl::Status RunBatch(absl::string_view call, size_t count,
                        absl::FunctionRef<int(size_t, CUstream_st* stream)> enqueue);
  // One copy between unified addresses (device and host pointers alike).
  struct Transfer {
    unsigned long long to;    // CUdeviceptr
    unsigned long long from;  // CUdeviceptr
    size_t length;
  };
  // Runs `count` copies and waits for them: one cuMemcpyBatchAsync where the
  // driver has it (the driver's per-copy cost is what scattered pages pay:
  // 490 vs 680 µs for 256 × 4 KiB on an H100), else one call per copy.
  absl::Status RunCopies(size_t count, absl::FunctionRef<Transfer(size_t)> transfer);
  absl::Status InRange(uint64_t offset, uint64_t length) const;

  // Loads the scatter kernel; without it every write takes RunCopies.
  void LoadScatterKernel();
  // Writes `copies` through the scatter kernel when there are enough of
  // them, they are small, and every source lies in pinned memory from
  // AllocateHostBuffer;
  // nullopt when the caller should use RunCopies instead.
  std::optional<absl::Status> TryScatter(absl::Span<const HostToDevice> copies);
  bool InPinnedBuffer(const void* memory, size_t length)
      ABSL_SHARED_LOCKS_REQUIRED(host_buffers_mu_);
  // A pinned piece table of kScatterMaxPieces (the kernel reads it from
  // host memory); null when pinned memory cannot be had.
  void* AcquirePieceTable();
  void ReleasePieceTable(void* table);
  // Creates and maps the physical memory of the granule at `offset`.
  absl::StatusOr<PhysicalHandle> MapGranule(uint64_t offset);
  void UnmapGranule(uint64_t offset, PhysicalHandle handle);
  // Removes the granule at `offset` from granules_, if it is there.
  std::optional<PhysicalHandle> TakeGranule(uint64_t offset);

  // Borrows an idle stream, waiting for one when all are busy.
  CUstream_st* AcquireStream();
  void ReleaseStream(CUstream_st* stream);

  const CudaDriver& cu_;
  // More than the FUSE worker threads, so a batch rarely waits.
  static constexpr int kStreams = 32;

  const uint64_t granule_;
  int device_ = 0;                // CUdevice
  CUctx_st* context_ = nullptr;   // the device's primary context
  unsigned long long base_ = 0;   // CUdeviceptr of the reserved arena
  uint64_t arena_size_ = 0;
  bool shareable_ = false;  // physical memory exportable as POSIX fds
  std::string description_;
  mutable std::atomic<bool> context_lost_{false};
  // Cleared when the driver refuses a batched copy.
  std::atomic<bool> batch_copies_{true};

  // Fewer pieces than this go as copies (the launch costs about what a few
  // copies do); so do more than kScatterMaxPieces.
  static constexpr size_t kScatterMinPieces = 4;
  static constexpr size_t kScatterMaxPieces = 4096;
  // The kernel is for small pieces: each is one block's work, reading host
  // memory over the bus, where a copy engine moves a large piece faster.
  static constexpr uint64_t kScatterMaxAveragePiece = 64 << 10;
  CUmod_st* scatter_module_ = nullptr;
  CUfunc_st* scatter_kernel_ = nullptr;
  // Set once the kernel is loaded; cleared when a launch fails without
  // losing the context.
  std::atomic<bool> scatter_enabled_{false};
  std::atomic<uint64_t> scattered_writes_{0};
  absl::Mutex piece_tables_mu_;
  std::vector<void*> idle_piece_tables_ ABSL_GUARDED_BY(piece_tables_mu_);

  absl::Mutex granules_mu_;
  // Arena offset of each committed granule -> its physical allocation.
  absl::flat_hash_map<uint64_t, PhysicalHandle> granules_ ABSL_GUARDED_BY(granules_mu_);

  absl::Mutex streams_mu_;
  std::vector<CUstream_st*> idle_streams_ ABSL_GUARDED_BY(streams_mu_);
  std::vector<CUstream_st*> all_streams_ ABSL_GUARDED_BY(streams_mu_);

  absl::Mutex host_buffers_mu_;
  // Start -> length of the buffers from cuMemHostAlloc (the others came
  // from the heap fallback).
  absl::btree_map<uintptr_t, size_t> pinned_buffers_ ABSL_GUARDED_BY(host_buffers_mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_
