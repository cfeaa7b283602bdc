// CudaDevice::FillCopy and ExportShared: GPU memory of another process's
// filled with a copy made inside the GPU, and the arena's own pieces handed
// to another process as POSIX file descriptors, which it imports and maps
// (cuMemImportFromShareableHandle, cuMemMap).
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

// Allocations' file descriptors, holding the device's context while they
// live (ReleaseExport). The memory itself lives on while an importer maps
// it.
class CudaDevice::Export final : public ExportedMemory {
 public:
  Export(CudaDevice* device, uint64_t size) : device_(device), size_(size) {}
  ~Export() override {
    for (const ExportedPiece& piece : pieces_) close(piece.fd);
    device_->ReleaseExport();
  }
  void Add(int fd, uint64_t length) { pieces_.push_back({fd, length, device_->gpu_.pci_bus_id}); }

  Kind kind() const override { return Kind::kCuda; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  CudaDevice* const device_;
  const uint64_t size_;
  std::vector<ExportedPiece> pieces_;
};

absl::StatusOr<std::vector<Device::CopyPiece>> CudaDevice::PlanCopy(
    uint64_t size, absl::Span<const DeviceToDevice> /*copies*/) const {
  if (!gpu_.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu_.description, " cannot import memory from file descriptors"));
  }
  CopyPiece piece;
  piece.kind = ExportedMemory::Kind::kCuda;
  piece.pci_bus_id = gpu_.pci_bus_id;
  piece.bytes = std::max(gpu_.granule, (size + gpu_.granule - 1) / gpu_.granule * gpu_.granule);
  return std::vector<CopyPiece>{piece};
}

absl::Status CudaDevice::FillCopy(absl::Span<const CopyMemory> pieces,
                                  absl::Span<const DeviceToDevice> copies) {
  if (!gpu_.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu_.description, " cannot import memory from file descriptors"));
  }
  if (pieces.size() != 1) return absl::FailedPreconditionError("a copy here is one piece");
  const int memory = pieces[0].fd;
  const uint64_t memory_bytes = pieces[0].bytes;
  if (memory_bytes == 0 || memory_bytes % gpu_.granule != 0) {
    return absl::InvalidArgumentError("the memory for a copy is not whole granules");
  }
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
    if (c.destination_offset > memory_bytes || c.length > memory_bytes - c.destination_offset) {
      return absl::InternalError("a copy lies past the memory it fills");
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (!context_.held()) {
      if (absl::Status s = CreateContext(); !s.ok()) return s;
    }
    ++in_flight_;
  }
  absl::Status status = FillImported(memory, memory_bytes, copies);
  absl::MutexLock lock(&mu_);
  --in_flight_;
  return status;
}

absl::Status CudaDevice::FillImported(int memory, uint64_t memory_bytes,
                                      absl::Span<const DeviceToDevice> copies) {
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  cu::CUmemGenericAllocationHandle handle;
  if (!context_
           .Check("cuMemImportFromShareableHandle",
                  cu_.cuMemImportFromShareableHandle(
                      &handle, reinterpret_cast<void*>(static_cast<intptr_t>(memory)),
                      cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
           .ok()) {
    return absl::InvalidArgumentError("the memory for a copy is no CUDA allocation");
  }
  // Mapped here only while the copy runs: the daemon keeps no view of it.
  cu::CUdeviceptr view = 0;
  absl::Status status = context_.Check(
      "cuMemAddressReserve", cu_.cuMemAddressReserve(&view, memory_bytes, gpu_.granule, 0, 0));
  bool mapped = false;
  if (status.ok()) {
    status = context_.Check("cuMemMap", cu_.cuMemMap(view, memory_bytes, 0, handle, 0));
    mapped = status.ok();
    if (!mapped) status = absl::InvalidArgumentError("the memory for a copy is too small");
  }
  if (status.ok()) {
    cu::CUmemAccessDesc access = {};
    access.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, gpu_.device};
    access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = context_.Check("cuMemSetAccess", cu_.cuMemSetAccess(view, memory_bytes, &access, 1));
    if (!status.ok()) status = absl::InvalidArgumentError("the memory for a copy is not on " +
                                                          gpu_.description);
  }
  if (status.ok()) {
    // The caller's memory reads as the file: zeros where the copies put no
    // bytes. Every item is disjoint from the others, as streams run them
    // in any order.
    std::vector<DeviceToDevice> sorted(copies.begin(), copies.end());
    std::sort(sorted.begin(), sorted.end(), [](const DeviceToDevice& a, const DeviceToDevice& b) {
      return a.destination_offset < b.destination_offset;
    });
    std::vector<DeviceRange> gaps;
    uint64_t at = 0;
    for (const DeviceToDevice& c : sorted) {
      if (c.destination_offset > at) gaps.push_back({at, c.destination_offset - at});
      at = std::max(at, c.destination_offset + c.length);
    }
    if (at < memory_bytes) gaps.push_back({at, memory_bytes - at});
    status = streams_.Run("cuMemsetD8Async, cuMemcpyAsync", gaps.size() + sorted.size(),
                          [&](size_t i, cu::CUstream stream) {
                            if (i < gaps.size()) {
                              return static_cast<int>(cu_.cuMemsetD8Async(
                                  view + gaps[i].offset, 0, gaps[i].length, stream));
                            }
                            const DeviceToDevice& c = sorted[i - gaps.size()];
                            return static_cast<int>(cu_.cuMemcpyAsync(
                                view + c.destination_offset, base_ + c.source_offset, c.length,
                                stream));
                          });
  }
  if (mapped) context_.Check("cuMemUnmap", cu_.cuMemUnmap(view, memory_bytes)).IgnoreError();
  if (view != 0) {
    context_.Check("cuMemAddressFree", cu_.cuMemAddressFree(view, memory_bytes)).IgnoreError();
  }
  context_.Check("cuMemRelease", cu_.cuMemRelease(handle)).IgnoreError();
  return status;
}

void CudaDevice::ReleaseExport() {
  absl::MutexLock lock(&mu_);
  --exports_;
}

bool CudaDevice::Exclusive(DeviceRange range) const {
  absl::MutexLock lock(&mu_);
  return ExclusiveLocked(range, /*committed=*/false);
}

bool CudaDevice::ExclusiveLocked(DeviceRange range, bool committed) const {
  return InRange(range.offset, range.length).ok() &&
         pieces_.Exclusive(range.offset, range.length, committed);
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaDevice::ExportShared(
    uint64_t size, absl::Span<const DeviceRange> ranges) {
  if (!gpu_.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu_.description, " cannot export memory as file descriptors"));
  }
  std::vector<Piece> exported_pieces;
  {
    absl::MutexLock lock(&mu_);
    for (const DeviceRange& range : ranges) {
      if (!ExclusiveLocked(range, /*committed=*/true)) {
        return absl::FailedPreconditionError("a shared range is not a block of its own");
      }
      for (const Piece& piece : pieces_.MarkExported(range.offset, range.length)) {
        exported_pieces.push_back(piece);
      }
    }
    // The committed ranges hold the context now; the export holds it after.
    ++exports_;
  }
  // The caller keeps the ranges committed meanwhile, so the pieces stay.
  auto exported = std::make_unique<Export>(this, size);
  if (absl::Status s = context_.Enter(); !s.ok()) return s;
  for (const Piece& piece : exported_pieces) {
    int fd = -1;
    if (absl::Status s =
            context_.Check("cuMemExportToShareableHandle",
                           cu_.cuMemExportToShareableHandle(
                               &fd, piece.handle, cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        !s.ok()) {
      return s;
    }
    exported->Add(fd, piece.length);
  }
  return exported;
}

}  // namespace cudafs
