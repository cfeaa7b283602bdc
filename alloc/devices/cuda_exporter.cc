#include "alloc/devices/cuda_exporter.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

// Allocations' file descriptors, holding the device's context while they
// live (Released). The memory itself lives on while an importer maps it.
class CudaExporter::Export final : public ExportedMemory {
 public:
  Export(CudaExporter* exporter, uint64_t size, std::string pci_bus_id)
      : exporter_(exporter), size_(size), pci_bus_id_(std::move(pci_bus_id)) {}
  ~Export() override {
    for (const ExportedPiece& piece : pieces_) close(piece.fd);
    exporter_->Released();
  }
  void Add(int fd, uint64_t length) { pieces_.push_back({fd, length, pci_bus_id_}); }

  Kind kind() const override { return Kind::kCuda; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  CudaExporter* const exporter_;
  const uint64_t size_;
  const std::string pci_bus_id_;
  std::vector<ExportedPiece> pieces_;
};

absl::StatusOr<std::vector<Exporter::CopyPiece>> CudaExporter::PlanCopy(
    uint64_t size, absl::Span<const DeviceToDevice> /*copies*/) const {
  const CudaDevice::Traits& gpu = device_->gpu_;
  if (!gpu.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu.description, " cannot import memory from file descriptors"));
  }
  CopyPiece piece;
  piece.kind = ExportedMemory::Kind::kCuda;
  piece.pci_bus_id = gpu.pci_bus_id;
  piece.bytes = std::max(gpu.granule, (size + gpu.granule - 1) / gpu.granule * gpu.granule);
  return std::vector<CopyPiece>{piece};
}

absl::Status CudaExporter::FillCopy(absl::Span<const CopyMemory> pieces,
                                    absl::Span<const DeviceToDevice> copies) {
  const CudaDevice::Traits& gpu = device_->gpu_;
  if (!gpu.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu.description, " cannot import memory from file descriptors"));
  }
  if (pieces.size() != 1) return absl::FailedPreconditionError("a copy here is one piece");
  const int memory = pieces[0].fd;
  const uint64_t memory_bytes = pieces[0].bytes;
  if (memory_bytes == 0 || memory_bytes % gpu.granule != 0) {
    return absl::InvalidArgumentError("the memory for a copy is not whole granules");
  }
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = device_->InRange(c.source_offset, c.length); !s.ok()) return s;
    if (c.destination_offset > memory_bytes || c.length > memory_bytes - c.destination_offset) {
      return absl::InternalError("a copy lies past the memory it fills");
    }
  }
  {
    absl::MutexLock lock(&device_->mu_);
    if (!device_->context_.held()) {
      if (absl::Status s = device_->CreateContext(); !s.ok()) return s;
    }
    ++device_->in_flight_;
  }
  absl::Status status = FillImported(memory, memory_bytes, copies);
  absl::MutexLock lock(&device_->mu_);
  --device_->in_flight_;
  return status;
}

absl::Status CudaExporter::FillImported(int memory, uint64_t memory_bytes,
                                        absl::Span<const DeviceToDevice> copies) {
  const CudaDevice::Traits& gpu = device_->gpu_;
  const CudaDriver& driver = device_->cu_;
  CudaContext& context = device_->context_;
  CudaStreams& streams = device_->streams_;
  const unsigned long long base = device_->base_;
  if (absl::Status s = context.Enter(); !s.ok()) return s;
  cu::CUmemGenericAllocationHandle handle;
  if (!device_->context_
           .Check("cuMemImportFromShareableHandle",
                  driver.cuMemImportFromShareableHandle(
                      &handle, reinterpret_cast<void*>(static_cast<intptr_t>(memory)),
                      cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
           .ok()) {
    return absl::InvalidArgumentError("the memory for a copy is no CUDA allocation");
  }
  // Mapped here only while the copy runs: the daemon keeps no view of it.
  cu::CUdeviceptr view = 0;
  absl::Status status = context.Check(
      "cuMemAddressReserve", driver.cuMemAddressReserve(&view, memory_bytes, gpu.granule, 0, 0));
  bool mapped = false;
  if (status.ok()) {
    status = context.Check("cuMemMap", driver.cuMemMap(view, memory_bytes, 0, handle, 0));
    mapped = status.ok();
    if (!mapped) status = absl::InvalidArgumentError("the memory for a copy is too small");
  }
  if (status.ok()) {
    cu::CUmemAccessDesc access = {};
    access.location = {cu::CU_MEM_LOCATION_TYPE_DEVICE, gpu.device};
    access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = context.Check("cuMemSetAccess", driver.cuMemSetAccess(view, memory_bytes, &access, 1));
    if (!status.ok())
      status = absl::InvalidArgumentError("the memory for a copy is not on " + gpu.description);
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
    status =
        streams.Run("cuMemsetD8Async, cuMemcpyAsync", gaps.size() + sorted.size(),
                    [&](size_t i, cu::CUstream stream) {
                      if (i < gaps.size()) {
                        return static_cast<int>(driver.cuMemsetD8Async(view + gaps[i].offset, 0,
                                                                       gaps[i].length, stream));
                      }
                      const DeviceToDevice& c = sorted[i - gaps.size()];
                      return static_cast<int>(driver.cuMemcpyAsync(
                          view + c.destination_offset, base + c.source_offset, c.length, stream));
                    });
  }
  if (mapped) context.Check("cuMemUnmap", driver.cuMemUnmap(view, memory_bytes)).IgnoreError();
  if (view != 0) {
    context.Check("cuMemAddressFree", driver.cuMemAddressFree(view, memory_bytes)).IgnoreError();
  }
  context.Check("cuMemRelease", driver.cuMemRelease(handle)).IgnoreError();
  return status;
}

void CudaExporter::Released() { device_->ReleaseExport(); }

bool CudaExporter::can_share() const { return device_->gpu_.shareable; }

bool CudaExporter::Exclusive(DeviceRange range) const {
  absl::MutexLock lock(&device_->mu_);
  return device_->ExclusiveLocked(range, /*committed=*/false);
}

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaExporter::ExportShared(
    uint64_t size, absl::Span<const DeviceRange> ranges) {
  const CudaDevice::Traits& gpu = device_->gpu_;
  const CudaDriver& driver = device_->cu_;
  CudaContext& context = device_->context_;
  if (!gpu.shareable) {
    return absl::UnimplementedError(
        absl::StrCat(gpu.description, " cannot export memory as file descriptors"));
  }
  std::vector<PhysicalPieces::Piece> exported_pieces;
  {
    absl::MutexLock lock(&device_->mu_);
    for (const DeviceRange& range : ranges) {
      if (!device_->ExclusiveLocked(range, /*committed=*/true)) {
        return absl::FailedPreconditionError("a shared range is not a block of its own");
      }
      for (const PhysicalPieces::Piece& piece :
           device_->pieces_.MarkExported(range.offset, range.length)) {
        exported_pieces.push_back(piece);
      }
    }
    // The committed ranges hold the context now; the export holds it after.
    ++device_->exports_;
  }
  // The caller keeps the ranges committed meanwhile, so the pieces stay.
  auto exported = std::make_unique<Export>(this, size, gpu.pci_bus_id);
  if (absl::Status s = context.Enter(); !s.ok()) return s;
  for (const PhysicalPieces::Piece& piece : exported_pieces) {
    int fd = -1;
    if (absl::Status s =
            context.Check("cuMemExportToShareableHandle",
                          driver.cuMemExportToShareableHandle(
                              &fd, piece.handle, cu::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        !s.ok()) {
      return s;
    }
    exported->Add(fd, piece.length);
  }
  return exported;
}

}  // namespace cudafs
