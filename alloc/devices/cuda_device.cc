#include "alloc/devices/cuda_device.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/scatter_kernel.h"

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

std::string PciBusId(const CudaDriver& cu, CUdevice device) {
  char bus_id[32] = {};
  if (cu.cuDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != CUDA_SUCCESS) return "?";
  return absl::AsciiStrToLower(bus_id);
}

std::string DeviceName(const CudaDriver& cu, CUdevice device) {
  char name[256] = {};
  if (cu.cuDeviceGetName(name, sizeof name, device) != CUDA_SUCCESS) return "?";
  return name;
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
    CUdevice device;
    if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) {
      return s;
    }
    CudaDeviceInfo info;
    info.index = index;
    info.name = DeviceName(cu, device);
    info.pci_bus_id = PciBusId(cu, device);
    size_t total = 0;
    if (absl::Status s = cu.Check("cuDeviceTotalMem", cu.cuDeviceTotalMem(&total, device));
        !s.ok()) {
      return s;
    }
    info.total_bytes = total;
    // Free memory is a property of a context: borrow the primary one.
    CUcontext context;
    if (cu.cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS) {
      size_t free = 0;
      if (cu.cuCtxSetCurrent(context) == CUDA_SUCCESS &&
          cu.cuMemGetInfo(&free, &total) == CUDA_SUCCESS) {
        info.free_bytes = free;
      }
      cu.cuCtxSetCurrent(nullptr);
      cu.cuDevicePrimaryCtxRelease(device);
    }
    devices.push_back(std::move(info));
  }
  return devices;
}

absl::StatusOr<int> ResolveCudaDevice(absl::string_view spec) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  absl::StatusOr<int> count = DeviceCount(cu);
  if (!count.ok()) return count.status();
  if (spec.empty()) return 0;
  int index;
  if (absl::SimpleAtoi(spec, &index)) {
    if (index < 0 || index >= *count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device=%s: GPU %d does not exist (this machine has %d: 0..%d)", spec, index, *count,
          *count - 1));
    }
    return index;
  }
  // A PCI bus id; the driver accepts "domain:bus:device.function" and
  // "bus:device.function".
  const std::string bus_id(spec);
  CUdevice device;
  if (cu.cuDeviceGetByPCIBusId(&device, bus_id.c_str()) != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device=%s: no GPU with that PCI bus id (see cudafs --list-devices)", spec));
  }
  // CUdevice values are the ordinals the driver counts from 0.
  return static_cast<int>(device);
}

absl::StatusOr<uint64_t> CudaTotalMemory(int index) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  CUdevice device;
  if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) return s;
  size_t total = 0;
  if (absl::Status s = cu.Check("cuDeviceTotalMem", cu.cuDeviceTotalMem(&total, device));
      !s.ok()) {
    return s;
  }
  return total;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int index,
                                                               uint64_t arena_size) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  const CudaDriver& cu = **driver;
  CUdevice device;
  if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  int vmm = 0;
  cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device);
  if (!vmm) {
    return absl::UnavailableError(absl::StrFormat(
        "GPU %d (%s) lacks CUDA virtual memory management (cuMemCreate)", index,
        DeviceName(cu, device)));
  }
  int posix_fd_handles = 0;
  cu.cuDeviceGetAttribute(&posix_fd_handles,
                          CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device);

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granule = 0;
  if (absl::Status s = cu.Check(
          "cuMemGetAllocationGranularity",
          cu.cuMemGetAllocationGranularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
      !s.ok()) {
    return absl::UnavailableError(s.message());
  }

  std::unique_ptr<CudaDevice> self(new CudaDevice(cu, granule));
  self->device_ = device;
  self->shareable_ = posix_fd_handles != 0;
  if (absl::Status s = cu.Check("cuDevicePrimaryCtxRetain",
                                cu.cuDevicePrimaryCtxRetain(&self->context_, device));
      !s.ok()) {
    self->context_ = nullptr;
    return absl::UnavailableError(s.message());
  }
  if (absl::Status s = self->Enter(); !s.ok()) return s;
  // Streams are made up front: creating one needs device memory, which a
  // full GPU may not have when a request wants it.
  for (int i = 0; i < kStreams; ++i) {
    CUstream stream;
    if (absl::Status s = cu.Check("cuStreamCreate",
                                  cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        !s.ok()) {
      return absl::UnavailableError(s.message());
    }
    absl::MutexLock lock(&self->streams_mu_);
    self->all_streams_.push_back(stream);
    self->idle_streams_.push_back(stream);
  }
  self->arena_size_ = (arena_size + granule - 1) / granule * granule;
  CUdeviceptr base = 0;
  if (absl::Status s = cu.Check("cuMemAddressReserve",
                                cu.cuMemAddressReserve(&base, self->arena_size_, granule, 0, 0));
      !s.ok()) {
    self->arena_size_ = 0;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot reserve %d bytes of GPU address space: %s", arena_size, s.message()));
  }
  self->base_ = base;
  self->description_ = absl::StrFormat("GPU %d: %s (%s)", index, DeviceName(cu, device),
                                       PciBusId(cu, device));
  self->LoadScatterKernel();
  return self;
}

CudaDevice::CudaDevice(const CudaDriver& driver, uint64_t granule)
    : cu_(driver), granule_(granule) {}

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  cu_.cuCtxSetCurrent(context_);
  {
    absl::MutexLock lock(&streams_mu_);
    for (CUstream stream : all_streams_) cu_.cuStreamDestroy(stream);
  }
  {
    absl::MutexLock lock(&piece_tables_mu_);
    for (void* table : idle_piece_tables_) cu_.cuMemFreeHost(table);
  }
  if (scatter_module_ != nullptr) cu_.cuModuleUnload(scatter_module_);
  {
    absl::MutexLock lock(&granules_mu_);
    for (const auto& [offset, handle] : granules_) UnmapGranule(offset, handle);
    granules_.clear();
  }
  if (arena_size_ != 0) cu_.cuMemAddressFree(base_, arena_size_);
  cu_.cuCtxSetCurrent(nullptr);
  cu_.cuDevicePrimaryCtxRelease(device_);
}

std::string CudaDevice::Describe() const { return description_; }

absl::Status CudaDevice::Enter() const {
  if (context_lost_.load(std::memory_order_relaxed)) {
    return absl::InternalError(
        absl::StrCat(description_, ": the GPU context was lost; unmount and remount"));
  }
  return Check("cuCtxSetCurrent", cu_.cuCtxSetCurrent(context_));
}

absl::Status CudaDevice::Check(absl::string_view call, int result) const {
  const CUresult code = static_cast<CUresult>(result);
  if (code == CUDA_SUCCESS) return absl::OkStatus();
  absl::Status status = cu_.Check(call, code);
  // Out of memory is an ordinary ENOSPC, not worth a log line.
  if (absl::IsResourceExhausted(status)) return status;
  const bool sticky = IsStickyCudaError(code);
  if (sticky && context_lost_.exchange(true)) return status;  // said so already
  LogError(absl::StrCat(description_, ": ", status.message(),
                        sticky ? "; the GPU context is lost, every data operation now fails "
                                 "with EIO"
                               : ""));
  return status;
}

absl::Status CudaDevice::InRange(uint64_t offset, uint64_t length) const {
  if (offset > arena_size_ || length > arena_size_ - offset) {
    return absl::InternalError(
        absl::StrFormat("arena range [%d, +%d) is outside the arena", offset, length));
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaDevice::PhysicalHandle> CudaDevice::MapGranule(uint64_t offset) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  prop.requestedHandleTypes =
      shareable_ ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  CUmemGenericAllocationHandle handle;
  if (absl::Status s = Check("cuMemCreate", cu_.cuMemCreate(&handle, granule_, &prop, 0));
      !s.ok()) {
    return s;
  }
  const CUdeviceptr address = base_ + offset;
  if (absl::Status s = Check("cuMemMap", cu_.cuMemMap(address, granule_, 0, handle, 0)); !s.ok()) {
    cu_.cuMemRelease(handle);
    return s;
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (absl::Status s = Check("cuMemSetAccess", cu_.cuMemSetAccess(address, granule_, &access, 1));
      !s.ok()) {
    cu_.cuMemUnmap(address, granule_);
    cu_.cuMemRelease(handle);
    return s;
  }
  return handle;
}

void CudaDevice::UnmapGranule(uint64_t offset, PhysicalHandle handle) {
  // Failures here leak at most one granule of VRAM; the arena goes on.
  Check("cuMemUnmap", cu_.cuMemUnmap(base_ + offset, granule_)).IgnoreError();
  Check("cuMemRelease", cu_.cuMemRelease(handle)).IgnoreError();
}

std::optional<CudaDevice::PhysicalHandle> CudaDevice::TakeGranule(uint64_t offset) {
  absl::MutexLock lock(&granules_mu_);
  auto it = granules_.find(offset);
  if (it == granules_.end()) return std::nullopt;
  const PhysicalHandle handle = it->second;
  granules_.erase(it);
  return handle;
}

absl::Status CudaDevice::Commit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  if (absl::Status s = Enter(); !s.ok()) return s;
  // The driver calls run without our lock, so commits of different
  // granules overlap; the Arena never commits one granule twice at once.
  for (uint64_t at = offset; at < offset + length; at += granule_) {
    {
      absl::MutexLock lock(&granules_mu_);
      if (granules_.contains(at)) continue;
    }
    absl::StatusOr<PhysicalHandle> handle = MapGranule(at);
    if (!handle.ok()) {
      // All or nothing: give back what this call mapped.
      for (uint64_t undo = offset; undo < at; undo += granule_) {
        if (std::optional<PhysicalHandle> taken = TakeGranule(undo)) UnmapGranule(undo, *taken);
      }
      return handle.status();
    }
    absl::MutexLock lock(&granules_mu_);
    granules_.emplace(at, *handle);
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::Decommit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  if (absl::Status s = Enter(); !s.ok()) return s;
  for (uint64_t at = offset; at < offset + length; at += granule_) {
    if (std::optional<PhysicalHandle> handle = TakeGranule(at)) UnmapGranule(at, *handle);
  }
  return absl::OkStatus();
}

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

bool CudaDevice::InPinnedBuffer(const void* memory, size_t length) {
  const auto start = reinterpret_cast<uintptr_t>(memory);
  auto it = pinned_buffers_.upper_bound(start);
  if (it == pinned_buffers_.begin()) return false;
  --it;
  return start + length <= it->first + it->second;
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
    // The GPU reads pinned memory from cuMemHostAlloc at its host address;
    // other memory it may not reach.
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

void* CudaDevice::AllocateHostBuffer(size_t length) {
  void* buffer = nullptr;
  if (Enter().ok() &&
      Check("cuMemHostAlloc", cu_.cuMemHostAlloc(&buffer, length, CU_MEMHOSTALLOC_PORTABLE))
          .ok()) {
    absl::MutexLock lock(&host_buffers_mu_);
    pinned_buffers_.emplace(reinterpret_cast<uintptr_t>(buffer), length);
    return buffer;
  }
  // Pageable memory still works, through the driver's staging.
  return Device::AllocateHostBuffer(length);
}

void CudaDevice::FreeHostBuffer(void* buffer, size_t length) {
  {
    absl::MutexLock lock(&host_buffers_mu_);
    if (pinned_buffers_.erase(reinterpret_cast<uintptr_t>(buffer)) == 0) {
      Device::FreeHostBuffer(buffer, length);
      return;
    }
  }
  cu_.cuCtxSetCurrent(context_);
  Check("cuMemFreeHost", cu_.cuMemFreeHost(buffer)).IgnoreError();
}

void CudaDevice::RegisterHostMemory(void* memory, size_t length) {
  if (!Enter().ok()) return;
  // A failure only costs speed: the driver stages pageable memory itself.
  Check("cuMemHostRegister",
        cu_.cuMemHostRegister(memory, length, CU_MEMHOSTREGISTER_PORTABLE))
      .IgnoreError();
}

void CudaDevice::UnregisterHostMemory(void* memory) {
  cu_.cuCtxSetCurrent(context_);
  // Fails harmlessly for memory whose registration failed.
  (void)cu_.cuMemHostUnregister(memory);
}

}  // namespace cudafs
