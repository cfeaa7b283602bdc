// CudaDevice::ExportCopy and ExportShared: GPU memory handed to another
// process as POSIX file descriptors, which it imports and maps
// (cuMemImportFromShareableHandle, cuMemMap): a copy made inside the GPU
// into an allocation of its own, or the arena's own pieces.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

// Allocations' file descriptors, holding the device's context while they
// live (ReleaseExport); a copy's allocation, owned, is freed with them. The
// memory itself lives on while an importer maps it.
class CudaDevice::Export final : public ExportedMemory {
 public:
  Export(CudaDevice* device, uint64_t size, std::optional<PhysicalHandle> owned)
      : device_(device), size_(size), owned_(owned) {}
  ~Export() override {
    for (const ExportedPiece& piece : pieces_) close(piece.fd);
    device_->ReleaseExport(owned_);
  }
  void Add(int fd, uint64_t length) { pieces_.push_back({fd, length, device_->gpu_.pci_bus_id}); }

  Kind kind() const override { return Kind::kCuda; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  CudaDevice* const device_;
  const uint64_t size_;
  const std::optional<PhysicalHandle> owned_;
  std::vector<ExportedPiece> pieces_;
};

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaDevice::ExportCopy(
    uint64_t size, absl::Span<const DeviceToDevice> copies) {
  if (!gpu_.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu_.description, " cannot export memory as file descriptors"));
  }
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
    if (c.destination_offset > size || c.length > size - c.destination_offset) {
      return absl::InternalError("an export copy lies past the exported size");
    }
  }
  const uint64_t length =
      std::max(gpu_.granule, (size + gpu_.granule - 1) / gpu_.granule * gpu_.granule);
  {
    absl::MutexLock lock(&mu_);
    if (!context_.held()) {
      if (absl::Status s = CreateContext(); !s.ok()) return s;
    }
    ++in_flight_;
    ++exports_;
  }
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = MakeExport(length, size, copies);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  if (!exported.ok()) --exports_;
  return exported;
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaDevice::MakeExport(
    uint64_t length, uint64_t size, absl::Span<const DeviceToDevice> copies) {
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = gpu_.device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle;
  if (absl::Status s = context_.Check("cuMemCreate", cu_.cuMemCreate(&handle, length, &prop, 0));
      !s.ok()) {
    return s;
  }
  // Mapped here only while the copy runs: the daemon keeps no view of it.
  CUdeviceptr view = 0;
  absl::Status status = context_.Check("cuMemAddressReserve",
                                       cu_.cuMemAddressReserve(&view, length, gpu_.granule, 0, 0));
  bool mapped = false;
  if (status.ok()) {
    status = context_.Check("cuMemMap", cu_.cuMemMap(view, length, 0, handle, 0));
    mapped = status.ok();
  }
  if (status.ok()) {
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = context_.Check("cuMemSetAccess", cu_.cuMemSetAccess(view, length, &access, 1));
  }
  if (status.ok()) {
    // Fresh VRAM may hold another program's bytes: all of it is zeroed
    // before the file's bytes go in (holes and the tail stay zero).
    // Item 0 zeroes, item i + 1 is copies[i].
    status =
        streams_.Run("cuMemsetD8Async, cuMemcpyAsync", copies.size() + 1,
                     [&](size_t i, CUstream stream) {
                       if (i == 0)
                         return static_cast<int>(cu_.cuMemsetD8Async(view, 0, length, stream));
                       const DeviceToDevice& c = copies[i - 1];
                       return static_cast<int>(cu_.cuMemcpyAsync(
                           view + c.destination_offset, base_ + c.source_offset, c.length, stream));
                     });
  }
  if (mapped) context_.Check("cuMemUnmap", cu_.cuMemUnmap(view, length)).IgnoreError();
  if (view != 0)
    context_.Check("cuMemAddressFree", cu_.cuMemAddressFree(view, length)).IgnoreError();
  int fd = -1;
  if (status.ok()) {
    status = context_.Check(
        "cuMemExportToShareableHandle",
        cu_.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  }
  if (!status.ok()) {
    context_.Check("cuMemRelease", cu_.cuMemRelease(handle)).IgnoreError();
    return status;
  }
  auto exported = std::make_unique<Export>(this, size, handle);
  exported->Add(fd, length);
  return exported;
}

void CudaDevice::ReleaseExport(std::optional<PhysicalHandle> owned) {
  if (owned) context_.Check("cuMemRelease", cu_.cuMemRelease(*owned)).IgnoreError();
  absl::MutexLock lock(&mu_);
  --exports_;
}

bool CudaDevice::Exclusive(DeviceRange range) const {
  absl::MutexLock lock(&mu_);
  return ExclusiveLocked(range, /*committed=*/false);
}

bool CudaDevice::ExclusiveLocked(DeviceRange range, bool committed) const {
  if (range.length == 0 || range.offset % gpu_.granule != 0 || range.length % gpu_.granule != 0 ||
      !InRange(range.offset, range.length).ok()) {
    return false;
  }
  // Every piece there lies inside the range; `committed`: they tile it,
  // every granule committed.
  const uint64_t end = range.offset + range.length;
  uint64_t tiled = range.offset;
  auto it = pieces_.upper_bound(range.offset);
  if (it != pieces_.begin()) --it;
  for (; it != pieces_.end() && it->first < end; ++it) {
    const Piece& piece = it->second;
    if (it->first + piece.length <= range.offset) continue;
    if (it->first < range.offset || it->first + piece.length > end) return false;
    const uint64_t granules = piece.length / gpu_.granule;
    const uint64_t all = granules >= 64 ? ~uint64_t{0} : (uint64_t{1} << granules) - 1;
    if (it->first == tiled && piece.committed == all) tiled += piece.length;
  }
  return !committed || tiled == end;
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaDevice::ExportShared(
    uint64_t size, absl::Span<const DeviceRange> ranges) {
  if (!gpu_.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu_.description, " cannot export memory as file descriptors"));
  }
  std::vector<std::pair<PhysicalHandle, uint64_t>> handles;  // and their lengths
  {
    absl::MutexLock lock(&mu_);
    for (const DeviceRange& range : ranges) {
      if (!ExclusiveLocked(range, /*committed=*/true)) {
        return absl::FailedPreconditionError("a shared range is not a block of its own");
      }
      for (auto it = pieces_.find(range.offset);
           it != pieces_.end() && it->first < range.offset + range.length; ++it) {
        handles.emplace_back(it->second.handle, it->second.length);
      }
    }
    // The committed ranges hold the context now; the export holds it after.
    ++exports_;
  }
  // The caller keeps the ranges committed meanwhile, so the pieces stay.
  auto exported = std::make_unique<Export>(this, size, std::nullopt);
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  for (const auto& [handle, length] : handles) {
    int fd = -1;
    if (absl::Status s =
            context_.Check("cuMemExportToShareableHandle",
                           cu_.cuMemExportToShareableHandle(
                               &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        !s.ok()) {
      return s;
    }
    exported->Add(fd, length);
  }
  return exported;
}

}  // namespace cudafs
