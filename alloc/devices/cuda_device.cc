#include "alloc/devices/cuda_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/log.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int index, uint64_t arena_size,
                                                               CudaDeviceOptions options) {
  absl::StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status();
  return Create(**driver, index, arena_size, options);
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(const CudaDriver& cu, int index,
                                                               uint64_t arena_size,
                                                               CudaDeviceOptions options) {
  cu::CUdevice device;
  if (absl::Status s = cu.Check("cuDeviceGet", cu.cuDeviceGet(&device, index)); !s.ok()) {
    return absl::UnavailableError(s.message());
  }
  int vmm = 0;
  cu.cuDeviceGetAttribute(&vmm, cu::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                          device);
  if (!vmm) {
    return absl::UnavailableError(
        absl::StrFormat("GPU %d (%s) lacks CUDA virtual memory management (cuMemCreate)", index,
                        cu.DeviceName(device)));
  }
  int posix_fd_handles = 0;
  cu.cuDeviceGetAttribute(&posix_fd_handles,
                          cu::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                          device);
  int host_pointer = 0;
  cu.cuDeviceGetAttribute(&host_pointer,
                          cu::CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device);

  cu::CUmemAllocationProp prop = {};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = cu::CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granule = 0;
  if (absl::Status s = cu.Check("cuMemGetAllocationGranularity",
                                cu.cuMemGetAllocationGranularity(
                                    &granule, &prop, cu::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
      !s.ok()) {
    return absl::UnavailableError(s.message());
  }

  Traits traits;
  traits.device = device;
  traits.granule = granule;
  traits.arena_size = (arena_size + granule - 1) / granule * granule;
  traits.shareable = posix_fd_handles != 0;
  traits.kernel_reads_host = host_pointer != 0;
  traits.pci_bus_id = cu.PciBusId(device);
  traits.description =
      absl::StrFormat("GPU %d: %s (%s)", index, cu.DeviceName(device), traits.pci_bus_id);
  std::unique_ptr<CudaDevice> self(new CudaDevice(cu, std::move(traits), options));
  if (options.idle_release != absl::InfiniteDuration()) {
    self->releaser_ = std::thread([device = self.get()] { device->ReleaseWhenIdle(); });
  }
  return self;
}

CudaDevice::CudaDevice(const CudaDriver& driver, Traits traits, CudaDeviceOptions options)
    : cu_(driver),
      options_(options),
      gpu_(std::move(traits)),
      context_(driver, gpu_.device, gpu_.description),
      streams_(context_),
      scatter_(context_, streams_, gpu_.kernel_reads_host),
      host_ranges_(context_),
      pieces_(gpu_.granule, kMaxPieceBytes) {}

CudaDevice::~CudaDevice() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (releaser_.joinable()) releaser_.join();
  absl::MutexLock lock(&mu_);
  if (context_.held()) DestroyContext();
}

std::string CudaDevice::Describe() const { return gpu_.description; }

std::string CudaDevice::place() const {
  return absl::StrCat("gpu", gpu_.device);
}

std::optional<Device::GpuMemory> CudaDevice::PartMemory(size_t /*part*/) const {
  // Under mu_, so that the context is not released during the call; only
  // while the context lives, so that asking never wakes an idle GPU.
  absl::MutexLock lock(&mu_);
  if (!context_.held() || !context_.Enter().ok()) return std::nullopt;
  size_t free = 0;
  size_t total = 0;
  if (!context_.Check("cuMemGetInfo", cu_.cuMemGetInfo(&free, &total)).ok()) return std::nullopt;
  return GpuMemory{.free = free,
                   .total = total,
                   .reserve = options_.reserve_bytes,
                   .pci_bus_id = gpu_.pci_bus_id};
}

CudaDevice::Stats CudaDevice::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats;
  stats.has_context = context_.held();
  stats.contexts_created = contexts_created_;
  stats.physical_bytes = pieces_.bytes();
  stats.pieces = pieces_.size();
  stats.scattered_writes = scatter_.writes();
  return stats;
}

absl::Status CudaDevice::CreateContext() {
  const absl::Time start = absl::Now();
  absl::Status status = context_.Retain();
  if (status.ok()) {
    cu::CUdeviceptr base = 0;
    status = context_.Check("cuMemAddressReserve",
                            cu_.cuMemAddressReserve(&base, gpu_.arena_size, gpu_.granule, 0, 0));
    if (status.ok()) base_ = base;
  }
  if (status.ok()) status = streams_.Create(kStreams);
  if (!status.ok()) {
    LogError(absl::StrCat(gpu_.description, ": cannot create the CUDA context (", status.message(),
                          "); the write that needed it fails"));
    if (context_.held()) DestroyContext();
    return absl::IsResourceExhausted(status) ? status : absl::InternalError(status.message());
  }
  scatter_.Load();
  const PinnedHostRanges::Pinned pinned = host_ranges_.PinAll();
  ++contexts_created_;
  LogInfo(absl::StrFormat("%s: CUDA context created in %.0f ms (%d host buffers, %.1f MiB pinned)",
                          gpu_.description, absl::ToDoubleMilliseconds(absl::Now() - start),
                          pinned.ranges, static_cast<double>(pinned.bytes) / kMiB));
  return absl::OkStatus();
}

void CudaDevice::DestroyContext() {
  context_.MakeCurrent();
  host_ranges_.UnpinAll();
  streams_.Destroy();
  scatter_.Unload();
  // Only the destructor finds pieces here.
  for (const Piece& piece : pieces_.TakeAll()) UnmapPiece(piece);
  if (base_ != 0) cu_.cuMemAddressFree(base_, gpu_.arena_size);
  base_ = 0;
  // A lost context is gone with it, unless another GPU keeps it for host
  // memory pinned under it: the next one starts afresh.
  context_.Release();
}

void CudaDevice::ReleaseWhenIdle() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](CudaDevice* d) ABSL_NO_THREAD_SAFETY_ANALYSIS { return d->stopping_ || d->Idle(); },
        this));
    if (stopping_) return;
    // Idle for the whole grace period, or a Commit came and keeps it.
    const bool woken = mu_.AwaitWithTimeout(absl::Condition(
                                                +[](CudaDevice* d) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                                  return d->stopping_ || !d->Idle();
                                                },
                                                this),
                                            options_.idle_release);
    if (woken) continue;
    DestroyContext();
    LogInfo(absl::StrCat(gpu_.description, ": nothing stored; CUDA context released"));
  }
}

bool CudaDevice::EnterIfHeld() const { return context_.held() && context_.Enter().ok(); }

absl::Status CudaDevice::InRange(uint64_t offset, uint64_t length) const {
  if (offset > gpu_.arena_size || length > gpu_.arena_size - offset) {
    return absl::InternalError(
        absl::StrFormat("arena range [%d, +%d) is outside the arena", offset, length));
  }
  return absl::OkStatus();
}

absl::StatusOr<PhysicalPieces::Handle> CudaDevice::MapPiece(uint64_t offset, uint64_t length) {
  cu::CUmemAllocationProp prop = {};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = cu::CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = gpu_.device;
  prop.requestedHandleTypes =
      gpu_.shareable ? cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : cu::CU_MEM_HANDLE_TYPE_NONE;
  cu::CUmemGenericAllocationHandle handle;
  if (absl::Status s = context_.Check("cuMemCreate", cu_.cuMemCreate(&handle, length, &prop, 0));
      !s.ok()) {
    return s;
  }
  const cu::CUdeviceptr address = base_ + offset;
  if (absl::Status s = context_.Check("cuMemMap", cu_.cuMemMap(address, length, 0, handle, 0));
      !s.ok()) {
    cu_.cuMemRelease(handle);
    return s;
  }
  cu::CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (absl::Status s =
          context_.Check("cuMemSetAccess", cu_.cuMemSetAccess(address, length, &access, 1));
      !s.ok()) {
    cu_.cuMemUnmap(address, length);
    cu_.cuMemRelease(handle);
    return s;
  }
  return handle;
}

void CudaDevice::UnmapPiece(const Piece& piece) {
  // Failures here leak at most one piece of VRAM; the arena goes on.
  context_.Check("cuMemUnmap", cu_.cuMemUnmap(base_ + piece.offset, piece.length)).IgnoreError();
  context_.Check("cuMemRelease", cu_.cuMemRelease(piece.handle)).IgnoreError();
  if (piece.fd >= 0) close(piece.fd);
}

std::vector<CudaDevice::Piece> CudaDevice::Uncommit(uint64_t offset, uint64_t length) {
  std::vector<Piece> emptied = pieces_.Uncommit(offset, length);
  // Said while no other commit can map these offsets again, so that a
  // watcher hears of a piece's release before of one mapped in its place.
  if (watcher_) {
    for (const Piece& piece : emptied) watcher_(false, HandedPiece{.offset = piece.offset});
  }
  return emptied;
}

absl::Status CudaDevice::CanHandOver() const {
  if (gpu_.shareable) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      gpu_.description, " cannot export its memory as file descriptors, so no other process "
                        "can take the files over"));
}

void CudaDevice::WatchPieces(std::function<void(bool mapped, const HandedPiece& piece)> watcher) {
  watcher_ = std::move(watcher);
}

absl::Status CudaDevice::Commit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  // What this call maps: runs of granules no piece backs, cut into pieces.
  std::vector<std::pair<uint64_t, uint64_t>> to_map;
  {
    absl::MutexLock lock(&mu_);
    struct Clear {
      const CudaDevice* device;
      uint64_t offset;
      uint64_t end;
    } clear{this, offset, offset + length};
    mu_.Await(absl::Condition(
        +[](Clear* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return absl::c_none_of(c->device->unmapping_, [c](const DeviceRange& range) {
            return range.offset < c->end && c->offset < range.offset + range.length;
          });
        },
        &clear));
    if (!context_.held()) {
      if (absl::Status s = CreateContext(); !s.ok()) return s;
    }
    to_map = pieces_.Commit(offset, length);
    if (to_map.empty()) return absl::OkStatus();
    ++in_flight_;
  }
  if (absl::Status s = context_.Enter(); !s.ok()) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    for (const Piece& piece : Uncommit(offset, length)) UnmapPiece(piece);
    return s;
  }
  // The driver calls run without the lock, so commits of different granules
  // overlap; the Arena never commits one granule twice at once.
  std::vector<PhysicalPieces::Handle> mapped;
  uint64_t wanted = 0;
  for (const auto& [at, piece_length] : to_map) wanted += piece_length;
  absl::Status status = KeepReserve(wanted);
  const bool counted = status.ok() && options_.reserve_bytes > 0;
  for (const auto& [at, piece_length] : to_map) {
    if (!status.ok()) break;
    absl::StatusOr<PhysicalPieces::Handle> handle = MapPiece(at, piece_length);
    if (!handle.ok()) {
      status = handle.status();
      break;
    }
    mapped.push_back(*handle);
  }
  // A watcher gets each piece as a descriptor before any block in it is
  // handed out.
  std::vector<int> exported;
  for (size_t i = 0; status.ok() && watcher_ && i < mapped.size(); ++i) {
    int fd = -1;
    status = context_.Check("cuMemExportToShareableHandle",
                            cu_.cuMemExportToShareableHandle(
                                &fd, mapped[i], cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (status.ok()) exported.push_back(fd);
  }
  if (counted) reserve_pending_.fetch_sub(wanted);
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    for (size_t i = 0; i < mapped.size(); ++i) {
      pieces_.Add(to_map[i].first, mapped[i], to_map[i].second);
    }
    if (!status.ok()) {
      for (const int fd : exported) close(fd);
      // All or nothing: give back what this call committed.
      for (const Piece& piece : Uncommit(offset, length)) UnmapPiece(piece);
      return status;
    }
  }
  for (size_t i = 0; i < exported.size(); ++i) {
    const uint64_t granules = to_map[i].second / gpu_.granule;
    watcher_(true, HandedPiece{.offset = to_map[i].first,
                               .length = to_map[i].second,
                               .committed = granules >= 64 ? ~uint64_t{0}
                                                           : (uint64_t{1} << granules) - 1,
                               .fd = exported[i]});
  }
  return status;
}

absl::Status CudaDevice::KeepReserve(uint64_t wanted) {
  if (options_.reserve_bytes == 0) return absl::OkStatus();
  // Commits that passed this check and are still mapping count as taken:
  // the driver's free memory does not show them yet.
  const uint64_t pending = reserve_pending_.fetch_add(wanted);
  size_t free = 0;
  size_t total = 0;
  absl::Status status = context_.Check("cuMemGetInfo", cu_.cuMemGetInfo(&free, &total));
  const uint64_t taken = options_.reserve_bytes + pending;
  if (status.ok() && (free < taken || free - taken < wanted)) {
    status = absl::ResourceExhaustedError(
        absl::StrFormat("%s: %d bytes more would leave less than reserve= (%d bytes) free",
                        gpu_.description, wanted, options_.reserve_bytes));
  }
  if (!status.ok()) reserve_pending_.fetch_sub(wanted);
  return status;
}

absl::Status CudaDevice::Decommit(uint64_t offset, uint64_t length) {
  if (absl::Status s = InRange(offset, length); !s.ok()) return s;
  std::vector<Piece> emptied;
  {
    absl::MutexLock lock(&mu_);
    emptied = Uncommit(offset, length);
    if (emptied.empty()) return absl::OkStatus();
    ++in_flight_;
    for (const Piece& piece : emptied) unmapping_.push_back({piece.offset, piece.length});
  }
  absl::Status status = context_.Enter();
  // An importer's mapping keeps an exported piece alive, out of the
  // mount's reach: it shows zeros from now on, not the file's old bytes.
  std::vector<DeviceRange> zeros;
  for (const Piece& piece : emptied) {
    if (piece.exported) zeros.push_back({piece.offset, piece.length});
  }
  if (status.ok()) status = Zero(zeros);
  for (const Piece& piece : emptied) UnmapPiece(piece);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  for (const Piece& piece : emptied) {
    unmapping_.erase(absl::c_find_if(unmapping_, [&](const DeviceRange& range) {
      return range.offset == piece.offset;
    }));
  }
  return status;
}

absl::StatusOr<std::vector<CudaDevice::HandedPiece>> CudaDevice::HandOverPieces() {
  if (absl::Status s = CanHandOver(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<HandedPiece> handed;
  if (pieces_.empty()) return handed;
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  for (const Piece& piece : pieces_.All()) {
    int fd = -1;
    absl::Status s =
        piece.fd >= 0
            ? (fd = fcntl(piece.fd, F_DUPFD_CLOEXEC, 0)) >= 0 ? absl::OkStatus()
                                                              : absl::ErrnoToStatus(errno, "dup")
            : context_.Check("cuMemExportToShareableHandle",
                             cu_.cuMemExportToShareableHandle(
                                 &fd, piece.handle, cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (!s.ok()) {
      for (const HandedPiece& done : handed) close(done.fd);
      return s;
    }
    handed.push_back({piece.offset, piece.length, piece.committed, piece.exported, fd});
  }
  return handed;
}

absl::Status CudaDevice::AdoptPieces(absl::Span<const HandedPiece> pieces) {
  // The descriptors of the pieces from `kept` on are closed here; those
  // before it belong to pieces in the table, which close them.
  size_t kept = 0;
  absl::Cleanup close_rest = [pieces, &kept] {
    for (size_t i = kept; i < pieces.size(); ++i) close(pieces[i].fd);
  };
  if (pieces.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  // In arena order, as HandOverPieces gives them, each apart from the last.
  uint64_t end = 0;
  for (const HandedPiece& piece : pieces) {
    if (!pieces_.Fits(Piece{piece.offset, 0, piece.length, piece.committed}) ||
        !InRange(piece.offset, piece.length).ok() || piece.offset < end) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a piece handed over at [%d, +%d) does not fit the arena",
                          gpu_.description, piece.offset, piece.length));
    }
    end = piece.offset + piece.length;
  }
  if (!pieces_.empty()) return absl::FailedPreconditionError("the arena holds pieces already");
  if (!context_.held()) {
    if (absl::Status s = CreateContext(); !s.ok()) return s;
  }
  absl::Status status = context_.Enter();
  cu::CUmemAccessDesc access = {};
  access.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, gpu_.device};
  access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (const HandedPiece& handed : pieces) {
    if (!status.ok()) break;
    cu::CUmemGenericAllocationHandle handle;
    status = context_.Check("cuMemImportFromShareableHandle",
                            cu_.cuMemImportFromShareableHandle(
                                &handle, reinterpret_cast<void*>(static_cast<intptr_t>(handed.fd)),
                                cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    if (!status.ok()) break;
    const cu::CUdeviceptr address = base_ + handed.offset;
    status = context_.Check("cuMemMap", cu_.cuMemMap(address, handed.length, 0, handle, 0));
    if (!status.ok()) {
      cu_.cuMemRelease(handle);
      break;
    }
    status = context_.Check("cuMemSetAccess",
                            cu_.cuMemSetAccess(address, handed.length, &access, 1));
    if (!status.ok()) {
      cu_.cuMemUnmap(address, handed.length);
      cu_.cuMemRelease(handle);
      break;
    }
    pieces_.Restore(
        Piece{handed.offset, handle, handed.length, handed.committed, handed.exported, handed.fd});
    ++kept;
  }
  if (status.ok()) return status;
  for (const Piece& piece : pieces_.TakeAll()) UnmapPiece(piece);
  return status;
}

void CudaDevice::ReleaseExport() {
  absl::MutexLock lock(&mu_);
  --exports_;
}

bool CudaDevice::ExclusiveLocked(DeviceRange range, bool committed) const {
  return InRange(range.offset, range.length).ok() &&
         pieces_.Exclusive(range.offset, range.length, committed);
}

// The data operations: checked against the arena, then handed to the
// scatter kernel or the copy streams.
absl::Status CudaDevice::Write(absl::Span<const HostToDevice> copies) {
  for (const HostToDevice& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  if (std::optional<absl::Status> scattered = scatter_.TryWrite(
          copies, base_,
          [&](absl::Span<const HostToDevice> c) { return host_ranges_.AllPinned(c); })) {
    return *scattered;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const HostToDevice& c = copies[i];
    return CudaStreams::Transfer{base_ + c.device_offset,
                                 reinterpret_cast<cu::CUdeviceptr>(c.source), c.length};
  });
}

absl::Status CudaDevice::Read(absl::Span<const DeviceToHost> copies) {
  for (const DeviceToHost& c : copies) {
    if (absl::Status s = InRange(c.device_offset, c.length); !s.ok()) return s;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const DeviceToHost& c = copies[i];
    return CudaStreams::Transfer{reinterpret_cast<cu::CUdeviceptr>(c.destination),
                                 base_ + c.device_offset, c.length};
  });
}

absl::Status CudaDevice::Copy(absl::Span<const DeviceToDevice> copies) {
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.destination_offset, c.length); !s.ok()) return s;
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
  }
  return streams_.Copy(copies.size(), [&](size_t i) {
    const DeviceToDevice& c = copies[i];
    return CudaStreams::Transfer{base_ + c.destination_offset, base_ + c.source_offset, c.length};
  });
}

absl::Status CudaDevice::Zero(absl::Span<const DeviceRange> ranges) {
  for (const DeviceRange& r : ranges) {
    if (absl::Status s = InRange(r.offset, r.length); !s.ok()) return s;
  }
  return streams_.Run("cuMemsetD8Async", ranges.size(), [&](size_t i, cu::CUstream stream) {
    return static_cast<int>(
        cu_.cuMemsetD8Async(base_ + ranges[i].offset, 0, ranges[i].length, stream));
  });
}

void* CudaDevice::AllocateHostBuffer(size_t length) {
  absl::MutexLock lock(&mu_);
  return host_ranges_.Allocate(length, EnterIfHeld());
}

void CudaDevice::FreeHostBuffer(void* buffer, size_t /*length*/) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Remove(buffer);
}

void CudaDevice::RegisterHostMemory(void* memory, size_t length) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Register(memory, length, EnterIfHeld());
}

void CudaDevice::UnregisterHostMemory(void* memory) {
  absl::MutexLock lock(&mu_);
  host_ranges_.Remove(memory);
}

}  // namespace cudafs
