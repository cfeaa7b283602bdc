// CudaScatter: writes of many small pieces from pinned host memory as one
// launch of the scatter kernel (scatter_kernel.h) instead of one copy per
// piece: a flush of scattered dirty pages.
//
// Loaded with the context and unloaded with it. Without it (the GPU cannot
// read pinned memory at its host address, the module would not load, a
// launch was refused, CUDAFS_SCATTER_KERNEL=0) TryWrite declines and the
// caller copies.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_SCATTER_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_SCATTER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "alloc/devices/cuda_api.h"
#include "alloc/devices/device.h"

namespace cudafs {

class CudaContext;
class CudaStreams;

class CudaScatter {
 public:
  // Fewer pieces than kMinPieces go as copies (the launch costs about what
  // a few copies do); so do more than kMaxPieces.
  static constexpr size_t kMinPieces = 4;
  static constexpr size_t kMaxPieces = 4096;

  // Both must outlive this. `kernel_reads_host`: the GPU reads pinned
  // memory at its host address.
  CudaScatter(const CudaContext& context, CudaStreams& streams, bool kernel_reads_host);

  // Loads the kernel. REQUIRES: the context current, not loaded.
  void Load();
  // Unloads it and frees its piece tables. REQUIRES: the context current,
  // no TryWrite running.
  void Unload();

  // Writes `copies` to the arena at `base` through the kernel when there
  // are enough of them, they are small and `pinned` says every source lies
  // in pinned memory; nullopt when the caller should copy instead.
  std::optional<absl::Status> TryWrite(
      absl::Span<const HostToDevice> copies, unsigned long long base,
      absl::FunctionRef<bool(absl::Span<const HostToDevice>)> pinned);

  // Writes that went through the kernel.
  uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }

 private:
  // A pinned piece table of kMaxPieces (the kernel reads it from host
  // memory); null when pinned memory cannot be had.
  void* AcquirePieceTable();
  void ReleasePieceTable(void* table);

  const CudaContext& context_;
  CudaStreams& streams_;
  const bool kernel_reads_host_;
  cu::CUmod_st* module_ = nullptr;
  cu::CUfunc_st* kernel_ = nullptr;
  // Set once loaded; cleared when a launch fails without losing the context.
  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> writes_{0};
  absl::Mutex tables_mu_;
  std::vector<void*> idle_tables_ ABSL_GUARDED_BY(tables_mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_SCATTER_H_
