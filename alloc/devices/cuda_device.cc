#include "alloc/devices/cuda_device.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <optional>
#include <string_view>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_driver.h"
#include "alloc/devices/sorted_ranges.h"

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

namespace {

// One GPU of a device= list: an index or a PCI bus id (the driver accepts
// "domain:bus:device.function" and "bus:device.function").
absl::StatusOr<int> ResolveOne(const CudaDriver& cu, int count, absl::string_view item) {
  int index;
  if (absl::SimpleAtoi(item, &index)) {
    if (index < 0 || index >= count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device=%s: GPU %d does not exist (this machine has %d: 0..%d)", item, index, count,
          count - 1));
    }
    return index;
  }
  const std::string bus_id(item);
  CUdevice device;
  if (cu.cuDeviceGetByPCIBusId(&device, bus_id.c_str()) != CUDA_SUCCESS) {
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
  CUdevice device;
  if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) return s;
  size_t total = 0;
  if (absl::Status s = cu.Check("cuDeviceTotalMem", cu.cuDeviceTotalMem(&total, device));
      !s.ok()) {
    return s;
  }
  return total;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int index, uint64_t arena_size,
                                                               CudaDeviceOptions options) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  return Create(**driver, index, arena_size, options);
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(const CudaDriver& cu, int index,
                                                               uint64_t arena_size,
                                                               CudaDeviceOptions options) {
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
  int host_pointer = 0;
  cu.cuDeviceGetAttribute(&host_pointer,
                          CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device);

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

  std::unique_ptr<CudaDevice> self(new CudaDevice(cu, granule, options));
  self->device_ = device;
  self->shareable_ = posix_fd_handles != 0;
  self->kernel_reads_host_ = host_pointer != 0;
  self->arena_size_ = (arena_size + granule - 1) / granule * granule;
  self->pci_bus_id_ = PciBusId(cu, device);
  self->description_ =
      absl::StrFormat("GPU %d: %s (%s)", index, DeviceName(cu, device), self->pci_bus_id_);
  if (options.idle_release != absl::InfiniteDuration()) {
    self->releaser_ = std::thread([device = self.get()] { device->ReleaseWhenIdle(); });
  }
  return self;
}

CudaDevice::CudaDevice(const CudaDriver& driver, uint64_t granule, CudaDeviceOptions options)
    : cu_(driver), options_(options), granule_(granule) {}

CudaDevice::~CudaDevice() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (releaser_.joinable()) releaser_.join();
  absl::MutexLock lock(&mu_);
  if (context_.load() != nullptr) DestroyContext();
  absl::MutexLock hosts(&host_buffers_mu_);
  for (const auto& [start, range] : host_ranges_) {
    if (range.owned) munmap(reinterpret_cast<void*>(start), range.length);
  }
}

std::string CudaDevice::Describe() const { return description_; }

CudaDevice::Stats CudaDevice::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats;
  stats.has_context = context_.load() != nullptr;
  stats.contexts_created = contexts_created_;
  for (const auto& [offset, piece] : pieces_) stats.physical_bytes += piece.length;
  stats.pieces = pieces_.size();
  stats.scattered_writes = scattered_writes_.load();
  return stats;
}

absl::Status CudaDevice::CreateContext() {
  const absl::Time start = absl::Now();
  CUcontext context = nullptr;
  absl::Status status =
      cu_.Check("cuDevicePrimaryCtxRetain", cu_.cuDevicePrimaryCtxRetain(&context, device_));
  if (status.ok()) {
    context_.store(context);
    status = cu_.Check("cuCtxSetCurrent", cu_.cuCtxSetCurrent(context));
  }
  CUdeviceptr base = 0;
  if (status.ok()) {
    status = cu_.Check("cuMemAddressReserve",
                       cu_.cuMemAddressReserve(&base, arena_size_, granule_, 0, 0));
    if (status.ok()) base_ = base;
  }
  // Streams are made up front: creating one needs device memory, which a
  // full GPU may not have when a request wants it.
  for (int i = 0; i < kStreams && status.ok(); ++i) {
    CUstream stream;
    status = cu_.Check("cuStreamCreate", cu_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    if (status.ok()) {
      absl::MutexLock lock(&streams_mu_);
      all_streams_.push_back(stream);
      idle_streams_.push_back(stream);
    }
  }
  if (!status.ok()) {
    LogError(absl::StrCat(description_, ": cannot create the CUDA context (", status.message(),
                          "); the write that needed it fails"));
    if (context_.load() != nullptr) DestroyContext();
    return absl::IsResourceExhausted(status) ? status : absl::InternalError(status.message());
  }
  LoadScatterKernel();
  int pinned = 0;
  size_t pinned_bytes = 0;
  {
    absl::MutexLock lock(&host_buffers_mu_);
    for (auto& [start, range] : host_ranges_) {
      range.registered = Pin(reinterpret_cast<void*>(start), range.length);
      if (range.registered) {
        ++pinned;
        pinned_bytes += range.length;
      }
    }
  }
  ++contexts_created_;
  LogInfo(absl::StrFormat("%s: CUDA context created in %.0f ms (%d host buffers, %.1f MiB pinned)",
                          description_, absl::ToDoubleMilliseconds(absl::Now() - start), pinned,
                          static_cast<double>(pinned_bytes) / kMiB));
  return absl::OkStatus();
}

void CudaDevice::DestroyContext() {
  CUcontext context = context_.load();
  cu_.cuCtxSetCurrent(context);
  {
    absl::MutexLock lock(&host_buffers_mu_);
    for (auto& [start, range] : host_ranges_) {
      if (range.registered) (void)cu_.cuMemHostUnregister(reinterpret_cast<void*>(start));
      range.registered = false;
    }
  }
  {
    absl::MutexLock lock(&streams_mu_);
    for (CUstream stream : all_streams_) cu_.cuStreamDestroy(stream);
    all_streams_.clear();
    idle_streams_.clear();
  }
  {
    absl::MutexLock lock(&piece_tables_mu_);
    for (void* table : idle_piece_tables_) cu_.cuMemFreeHost(table);
    idle_piece_tables_.clear();
  }
  scatter_enabled_.store(false);
  if (scatter_module_ != nullptr) cu_.cuModuleUnload(scatter_module_);
  scatter_module_ = nullptr;
  scatter_kernel_ = nullptr;
  // Only the destructor finds pieces here.
  for (const auto& [offset, piece] : pieces_) UnmapPiece(offset, piece);
  pieces_.clear();
  if (base_ != 0) cu_.cuMemAddressFree(base_, arena_size_);
  base_ = 0;
  cu_.cuCtxSetCurrent(nullptr);
  cu_.cuDevicePrimaryCtxRelease(device_);
  context_.store(nullptr);
  // A lost context is gone with it: the next one starts afresh.
  context_lost_.store(false);
}

void CudaDevice::ReleaseWhenIdle() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](CudaDevice* d) ABSL_NO_THREAD_SAFETY_ANALYSIS { return d->stopping_ || d->Idle(); },
        this));
    if (stopping_) return;
    // Idle for the whole grace period, or a Commit came and keeps it.
    const bool woken = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](CudaDevice* d) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return d->stopping_ || !d->Idle();
            },
            this),
        options_.idle_release);
    if (woken) continue;
    DestroyContext();
    LogInfo(absl::StrCat(description_, ": nothing stored; CUDA context released"));
  }
}

absl::Status CudaDevice::Enter() const {
  CUcontext context = context_.load();
  if (context == nullptr) {
    return absl::InternalError(
        absl::StrCat(description_, ": data operation on memory that is not committed"));
  }
  if (context_lost_.load(std::memory_order_relaxed)) {
    return absl::InternalError(absl::StrCat(
        description_, ": the GPU context was lost; it is made again once nothing is stored"));
  }
  return Check("cuCtxSetCurrent", cu_.cuCtxSetCurrent(context));
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
                                 "with EIO until nothing is stored"
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

absl::StatusOr<CudaDevice::PhysicalHandle> CudaDevice::MapPiece(uint64_t offset,
                                                                uint64_t length) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  prop.requestedHandleTypes =
      shareable_ ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  CUmemGenericAllocationHandle handle;
  if (absl::Status s = Check("cuMemCreate", cu_.cuMemCreate(&handle, length, &prop, 0)); !s.ok()) {
    return s;
  }
  const CUdeviceptr address = base_ + offset;
  if (absl::Status s = Check("cuMemMap", cu_.cuMemMap(address, length, 0, handle, 0)); !s.ok()) {
    cu_.cuMemRelease(handle);
    return s;
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (absl::Status s = Check("cuMemSetAccess", cu_.cuMemSetAccess(address, length, &access, 1));
      !s.ok()) {
    cu_.cuMemUnmap(address, length);
    cu_.cuMemRelease(handle);
    return s;
  }
  return handle;
}

void CudaDevice::UnmapPiece(uint64_t offset, const Piece& piece) {
  // Failures here leak at most one piece of VRAM; the arena goes on.
  Check("cuMemUnmap", cu_.cuMemUnmap(base_ + offset, piece.length)).IgnoreError();
  Check("cuMemRelease", cu_.cuMemRelease(piece.handle)).IgnoreError();
}

absl::btree_map<uint64_t, CudaDevice::Piece>::iterator CudaDevice::PieceOf(uint64_t offset) {
  return Containing(pieces_, offset, [](const Piece& piece) { return piece.length; });
}

std::vector<std::pair<uint64_t, CudaDevice::Piece>> CudaDevice::Uncommit(uint64_t offset,
                                                                         uint64_t length) {
  std::vector<std::pair<uint64_t, Piece>> emptied;
  for (uint64_t at = offset; at < offset + length; at += granule_) {
    auto it = PieceOf(at);
    if (it == pieces_.end()) continue;
    it->second.committed &= ~(uint64_t{1} << ((at - it->first) / granule_));
    if (it->second.committed != 0) continue;
    emptied.emplace_back(it->first, it->second);
    pieces_.erase(it);
  }
  return emptied;
}

absl::Status CudaDevice::Commit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  // What this call maps: runs of granules no piece backs, cut into pieces.
  std::vector<std::pair<uint64_t, uint64_t>> to_map;
  {
    absl::MutexLock lock(&mu_);
    if (context_.load() == nullptr) {
      if (absl::Status s = CreateContext(); !s.ok()) return s;
    }
    const uint64_t max_piece = std::min<uint64_t>(kMaxPieceBytes, 64 * granule_);
    for (uint64_t at = offset; at < offset + length; at += granule_) {
      if (auto it = PieceOf(at); it != pieces_.end()) {
        // Still mapped since its last Decommit: committed again for free.
        it->second.committed |= uint64_t{1} << ((at - it->first) / granule_);
      } else if (!to_map.empty() && to_map.back().first + to_map.back().second == at &&
                 to_map.back().second < max_piece) {
        to_map.back().second += granule_;
      } else {
        to_map.emplace_back(at, granule_);
      }
    }
    if (to_map.empty()) return absl::OkStatus();
    ++in_flight_;
  }
  if (absl::Status s = Enter(); !s.ok()) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    for (const auto& [at, piece] : Uncommit(offset, length)) UnmapPiece(at, piece);
    return s;
  }
  // The driver calls run without the lock, so commits of different granules
  // overlap; the Arena never commits one granule twice at once.
  std::vector<Piece> mapped;
  uint64_t wanted = 0;
  for (const auto& [at, piece_length] : to_map) wanted += piece_length;
  absl::Status status = KeepReserve(wanted);
  const bool counted = status.ok() && options_.reserve_bytes > 0;
  for (const auto& [at, piece_length] : to_map) {
    if (!status.ok()) break;
    absl::StatusOr<PhysicalHandle> handle = MapPiece(at, piece_length);
    if (!handle.ok()) {
      status = handle.status();
      break;
    }
    const uint64_t granules = piece_length / granule_;
    mapped.push_back(Piece{*handle, piece_length,
                           granules == 64 ? ~uint64_t{0} : (uint64_t{1} << granules) - 1});
  }
  if (counted) reserve_pending_.fetch_sub(wanted);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  for (size_t i = 0; i < mapped.size(); ++i) pieces_.emplace(to_map[i].first, mapped[i]);
  if (status.ok()) return status;
  // All or nothing: give back what this call committed.
  for (const auto& [at, piece] : Uncommit(offset, length)) UnmapPiece(at, piece);
  return status;
}

absl::Status CudaDevice::KeepReserve(uint64_t wanted) {
  if (options_.reserve_bytes == 0) return absl::OkStatus();
  // Commits that passed this check and are still mapping count as taken:
  // the driver's free memory does not show them yet.
  const uint64_t pending = reserve_pending_.fetch_add(wanted);
  size_t free = 0;
  size_t total = 0;
  absl::Status status = Check("cuMemGetInfo", cu_.cuMemGetInfo(&free, &total));
  const uint64_t taken = options_.reserve_bytes + pending;
  if (status.ok() && (free < taken || free - taken < wanted)) {
    status = absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d bytes more would leave less than reserve= (%d bytes) free", description_, wanted,
        options_.reserve_bytes));
  }
  if (!status.ok()) reserve_pending_.fetch_sub(wanted);
  return status;
}

absl::Status CudaDevice::Decommit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  std::vector<std::pair<uint64_t, Piece>> emptied;
  {
    absl::MutexLock lock(&mu_);
    emptied = Uncommit(offset, length);
    if (emptied.empty()) return absl::OkStatus();
    ++in_flight_;
  }
  absl::Status status = Enter();
  for (const auto& [at, piece] : emptied) UnmapPiece(at, piece);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  return status;
}

}  // namespace cudafs
