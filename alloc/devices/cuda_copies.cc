// CudaDevice's data operations (cuda_device.h): copies on a pool of
// streams, batched where the driver can, and the scatter kernel for many
// small pieces from pinned memory.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/scatter_kernel.h"

namespace cudafs {

CUstream CudaDevice::AcquireStream() {
  absl::MutexLock lock(&streams_mu_);
  streams_mu_.Await(absl::Condition(
      +[](std::vector<CUstream>* idle) { return !idle->empty(); }, &idle_streams_));
  CUstream stream = idle_streams_.back();
  idle_streams_.pop_back();
  return stream;
}

void CudaDevice::ReleaseStream(CUstream stream) {
  absl::MutexLock lock(&streams_mu_);
  idle_streams_.push_back(stream);
}

absl::Status CudaDevice::RunBatch(absl::string_view call, size_t count,
                                  absl::FunctionRef<int(size_t, CUstream)> enqueue) {
  if (count == 0) return absl::OkStatus();
  if (absl::Status s = Enter(); !s.ok()) return s;
  CUstream stream = AcquireStream();
  absl::Status status = absl::OkStatus();
  for (size_t i = 0; i < count && status.ok(); ++i) status = Check(call, enqueue(i, stream));
  // Wait even after a failed enqueue: copies already queued must finish
  // before the caller reuses its buffers.
  absl::Status synced = Check("cuStreamSynchronize", cu_.cuStreamSynchronize(stream));
  ReleaseStream(stream);
  return status.ok() ? synced : status;
}

absl::Status CudaDevice::RunCopies(size_t count, absl::FunctionRef<Transfer(size_t)> transfer) {
  if (count == 0) return absl::OkStatus();
  if (count > 1 && cu_.cuMemcpyBatchAsync != nullptr && batch_copies_.load()) {
    std::vector<CUdeviceptr> to(count), from(count);
    std::vector<size_t> lengths(count);
    for (size_t i = 0; i < count; ++i) {
      const Transfer t = transfer(i);
      to[i] = t.to;
      from[i] = t.from;
      lengths[i] = t.length;
    }
    CUmemcpyAttributes attributes = {};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first_copy = 0;
    CUresult batched = CUDA_SUCCESS;
    absl::Status status = RunBatch("cuMemcpyBatchAsync", 1, [&](size_t, CUstream stream) {
      batched = cu_.cuMemcpyBatchAsync(to.data(), from.data(), lengths.data(), count,
                                       &attributes, &first_copy, 1, stream);
      return static_cast<int>(batched);
    });
    // A driver that declines batches (a platform without them) gets the
    // copies one by one from now on; a lost context stays an error.
    if (status.ok() || IsStickyCudaError(batched)) return status;
    batch_copies_.store(false);
  }
  return RunBatch("cuMemcpyAsync", count, [&](size_t i, CUstream stream) {
    const Transfer t = transfer(i);
    return static_cast<int>(cu_.cuMemcpyAsync(t.to, t.from, t.length, stream));
  });
}

absl::Status CudaDevice::Write(absl::Span<const HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  if (std::optional<absl::Status> scattered = TryScatter(copies)) return *scattered;
  return RunCopies(copies.size(), [&](size_t i) {
    const HostToDevice& c = copies[i];
    return Transfer{base_ + c.device_offset, reinterpret_cast<CUdeviceptr>(c.source), c.length};
  });
}

void CudaDevice::LoadScatterKernel() {
  // For measuring what the kernel gains: CUDAFS_SCATTER_KERNEL=0 turns it off.
  if (const char* env = std::getenv("CUDAFS_SCATTER_KERNEL"); env != nullptr &&
                                                            std::string_view(env) == "0") {
    LogInfo("CUDAFS_SCATTER_KERNEL=0: scattered writes go as copies");
    return;
  }
  if (!kernel_reads_host_) {
    LogInfo(absl::StrCat(description_,
                         ": the GPU cannot read pinned memory at its host address; scattered "
                         "writes go as copies"));
    return;
  }
  CUmodule module;
  CUfunction kernel;
  if (!Check("cuModuleLoadData", cu_.cuModuleLoadData(&module, kScatterKernelPtx)).ok()) {
    LogInfo(absl::StrCat(description_, ": no scatter kernel; scattered writes go as copies"));
    return;
  }
  if (!Check("cuModuleGetFunction", cu_.cuModuleGetFunction(&kernel, module, kScatterKernelName))
           .ok()) {
    cu_.cuModuleUnload(module);
    return;
  }
  scatter_module_ = module;
  scatter_kernel_ = kernel;
  scatter_enabled_.store(true);
}

void* CudaDevice::AcquirePieceTable() {
  {
    absl::MutexLock lock(&piece_tables_mu_);
    if (!idle_piece_tables_.empty()) {
      void* table = idle_piece_tables_.back();
      idle_piece_tables_.pop_back();
      return table;
    }
  }
  void* table = nullptr;
  if (!Check("cuMemHostAlloc", cu_.cuMemHostAlloc(&table, kScatterMaxPieces * sizeof(ScatterPiece),
                                                  CU_MEMHOSTALLOC_PORTABLE))
           .ok()) {
    return nullptr;
  }
  return table;
}

void CudaDevice::ReleasePieceTable(void* table) {
  absl::MutexLock lock(&piece_tables_mu_);
  idle_piece_tables_.push_back(table);
}

std::optional<absl::Status> CudaDevice::TryScatter(absl::Span<const HostToDevice> copies) {
  if (copies.size() < kScatterMinPieces || copies.size() > kScatterMaxPieces ||
      !scatter_enabled_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  uint64_t payload = 0;
  for (const HostToDevice& c : copies) payload += c.length;
  // Large pieces go faster as copies, on the copy engines.
  if (payload / copies.size() > kScatterMaxAveragePiece) return std::nullopt;
  {
    // The GPU reads pinned memory at its host address; other memory it may
    // not reach.
    absl::ReaderMutexLock lock(&host_buffers_mu_);
    for (const HostToDevice& c : copies) {
      if (!InPinnedBuffer(c.source, c.length)) return std::nullopt;
    }
  }
  if (absl::Status s = Enter(); !s.ok()) return s;
  auto* pieces = static_cast<ScatterPiece*>(AcquirePieceTable());
  if (pieces == nullptr) return std::nullopt;
  for (size_t i = 0; i < copies.size(); ++i) {
    const HostToDevice& c = copies[i];
    pieces[i] = {base_ + c.device_offset, reinterpret_cast<uintptr_t>(c.source), c.length};
  }
  CUdeviceptr table = reinterpret_cast<CUdeviceptr>(pieces);
  unsigned int count = static_cast<unsigned int>(copies.size());
  void* arguments[] = {&table, &count};
  const absl::Status status = RunBatch("cuLaunchKernel", 1, [&](size_t, CUstream stream) {
    return static_cast<int>(cu_.cuLaunchKernel(scatter_kernel_, count, 1, 1,
                                               kScatterThreadsPerBlock, 1, 1, 0, stream,
                                               arguments, nullptr));
  });
  ReleasePieceTable(pieces);
  if (status.ok()) {
    scattered_writes_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }
  if (context_lost_.load()) return status;
  // The driver refused the launch but the context lives: copies from now on
  // (they rewrite every piece).
  scatter_enabled_.store(false);
  return std::nullopt;
}

absl::Status CudaDevice::Read(absl::Span<const DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  return RunCopies(copies.size(), [&](size_t i) {
    const DeviceToHost& c = copies[i];
    return Transfer{reinterpret_cast<CUdeviceptr>(c.destination), base_ + c.device_offset,
                    c.length};
  });
}

absl::Status CudaDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.destination_offset, c.length); !s.ok()) return s;
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
  }
  return RunCopies(copies.size(), [&](size_t i) {
    const DeviceToDevice& c = copies[i];
    return Transfer{base_ + c.destination_offset, base_ + c.source_offset, c.length};
  });
}

absl::Status CudaDevice::Zero(absl::Span<const DeviceRange> ranges) {
  for (const DeviceRange& r : ranges) {
    if (absl::Status s = InRange(r.offset, r.length); !s.ok()) return s;
  }
  return RunBatch("cuMemsetD8Async", ranges.size(), [&](size_t i, CUstream stream) {
    return static_cast<int>(cu_.cuMemsetD8Async(base_ + ranges[i].offset, 0, ranges[i].length,
                                                stream));
  });
}

}  // namespace cudafs
