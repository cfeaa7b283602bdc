#include "alloc/devices/cuda_scatter.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_context.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/cuda_streams.h"
#include "alloc/devices/scatter_kernel.h"

namespace cudafs {
namespace {

// The kernel is for small pieces: each is one block's work, reading host
// memory over the bus, where a copy engine moves a large piece faster.
constexpr uint64_t kMaxAveragePiece = 64 << 10;

}  // namespace

CudaScatter::CudaScatter(const CudaContext& context, CudaStreams& streams, bool kernel_reads_host)
    : context_(context), streams_(streams), kernel_reads_host_(kernel_reads_host) {}

void CudaScatter::Load() {
  // For measuring what the kernel gains: CUDAFS_SCATTER_KERNEL=0 turns it off.
  if (const char* env = std::getenv("CUDAFS_SCATTER_KERNEL");
      env != nullptr && std::string_view(env) == "0") {
    LogInfo("CUDAFS_SCATTER_KERNEL=0: scattered writes go as copies");
    return;
  }
  if (!kernel_reads_host_) {
    LogInfo(absl::StrCat(context_.description(),
                         ": the GPU cannot read pinned memory at its host address; scattered "
                         "writes go as copies"));
    return;
  }
  const CudaDriver& cu = context_.driver();
  cu::CUmodule module;
  cu::CUfunction kernel;
  if (!context_.Check("cuModuleLoadData", cu.cuModuleLoadData(&module, kScatterKernelPtx)).ok()) {
    LogInfo(
        absl::StrCat(context_.description(), ": no scatter kernel; scattered writes go as copies"));
    return;
  }
  if (!context_
           .Check("cuModuleGetFunction",
                  cu.cuModuleGetFunction(&kernel, module, kScatterKernelName))
           .ok()) {
    cu.cuModuleUnload(module);
    return;
  }
  module_ = module;
  kernel_ = kernel;
  enabled_.store(true);
}

void CudaScatter::Unload() {
  const CudaDriver& cu = context_.driver();
  {
    absl::MutexLock lock(&tables_mu_);
    for (void* table : idle_tables_) cu.cuMemFreeHost(table);
    idle_tables_.clear();
  }
  enabled_.store(false);
  if (module_ != nullptr) cu.cuModuleUnload(module_);
  module_ = nullptr;
  kernel_ = nullptr;
}

void* CudaScatter::AcquirePieceTable() {
  {
    absl::MutexLock lock(&tables_mu_);
    if (!idle_tables_.empty()) {
      void* table = idle_tables_.back();
      idle_tables_.pop_back();
      return table;
    }
  }
  void* table = nullptr;
  if (!context_
           .Check("cuMemHostAlloc",
                  context_.driver().cuMemHostAlloc(&table, kMaxPieces * sizeof(ScatterPiece),
                                                   cu::CU_MEMHOSTALLOC_PORTABLE))
           .ok()) {
    return nullptr;
  }
  return table;
}

void CudaScatter::ReleasePieceTable(void* table) {
  absl::MutexLock lock(&tables_mu_);
  idle_tables_.push_back(table);
}

std::optional<absl::Status> CudaScatter::TryWrite(
    absl::Span<const HostToDevice> copies, cu::CUdeviceptr base,
    absl::FunctionRef<bool(absl::Span<const HostToDevice>)> pinned) {
  if (copies.size() < kMinPieces || copies.size() > kMaxPieces ||
      !enabled_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  uint64_t payload = 0;
  for (const HostToDevice& c : copies) payload += c.length;
  // Large pieces go faster as copies, on the copy engines.
  if (payload / copies.size() > kMaxAveragePiece) return std::nullopt;
  // The GPU reads pinned memory at its host address; other memory it may
  // not reach.
  if (!pinned(copies)) return std::nullopt;
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  auto* pieces = static_cast<ScatterPiece*>(AcquirePieceTable());
  if (pieces == nullptr) return std::nullopt;
  for (size_t i = 0; i < copies.size(); ++i) {
    const HostToDevice& c = copies[i];
    pieces[i] = {base + c.device_offset, reinterpret_cast<uintptr_t>(c.source), c.length};
  }
  cu::CUdeviceptr table = reinterpret_cast<cu::CUdeviceptr>(pieces);
  unsigned int count = static_cast<unsigned int>(copies.size());
  void* arguments[] = {&table, &count};
  const absl::Status status =
      streams_.Run("cuLaunchKernel", 1, [&](size_t, cu::CUstream stream) {
        return static_cast<int>(context_.driver().cuLaunchKernel(
            kernel_, count, 1, 1, kScatterThreadsPerBlock, 1, 1, 0, stream, arguments, nullptr));
      });
  ReleasePieceTable(pieces);
  if (status.ok()) {
    writes_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }
  if (context_.lost()) return status;
  // The driver refused the launch but the context lives: copies from now on
  // (they rewrite every piece).
  enabled_.store(false);
  return std::nullopt;
}

}  // namespace cudafs
