// CudaDevice::ExportCopy: file data copied inside the GPU into an
// allocation of its own, which another process imports from a POSIX file
// descriptor and maps (cuMemImportFromShareableHandle, cuMemMap).
#include <cuda.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "alloc/devices/cuda_device.h"
#include "alloc/devices/cuda_driver.h"

namespace cudafs {

// One allocation and its file descriptor; frees the allocation (through the
// device, which keeps its context meanwhile) when destroyed. The memory
// itself lives on while an importer maps it.
class CudaDevice::Export final : public ExportedMemory {
 public:
  Export(CudaDevice* device, PhysicalHandle handle, int fd, uint64_t size, uint64_t length)
      : device_(device), handle_(handle), size_(size), piece_{fd, length} {}
  ~Export() override {
    close(piece_.fd);
    device_->ReleaseExport(handle_);
  }

  Kind kind() const override { return Kind::kCuda; }
  std::string pci_bus_id() const override { return device_->pci_bus_id_; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return {&piece_, 1}; }

 private:
  CudaDevice* const device_;
  const PhysicalHandle handle_;
  const uint64_t size_;
  const ExportedPiece piece_;
};

absl::StatusOr<std::unique_ptr<ExportedMemory>> CudaDevice::ExportCopy(
    uint64_t size, absl::Span<const DeviceToDevice> copies) {
  if (!shareable_) {
    return absl::UnimplementedError(
        absl::StrCat(description_, " cannot export memory as file descriptors"));
  }
  for (const DeviceToDevice& c : copies) {
    if (absl::Status s = InRange(c.source_offset, c.length); !s.ok()) return s;
    if (c.destination_offset > size || c.length > size - c.destination_offset) {
      return absl::InternalError("an export copy lies past the exported size");
    }
  }
  const uint64_t length = std::max(granule_, (size + granule_ - 1) / granule_ * granule_);
  {
    absl::MutexLock lock(&mu_);
    if (context_.load() == nullptr) {
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
  if (absl::Status s = Enter(); !s.ok()) return s;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle;
  if (absl::Status s = Check("cuMemCreate", cu_.cuMemCreate(&handle, length, &prop, 0)); !s.ok()) {
    return s;
  }
  // Mapped here only while the copy runs: the daemon keeps no view of it.
  CUdeviceptr view = 0;
  absl::Status status =
      Check("cuMemAddressReserve", cu_.cuMemAddressReserve(&view, length, granule_, 0, 0));
  bool mapped = false;
  if (status.ok()) {
    status = Check("cuMemMap", cu_.cuMemMap(view, length, 0, handle, 0));
    mapped = status.ok();
  }
  if (status.ok()) {
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = Check("cuMemSetAccess", cu_.cuMemSetAccess(view, length, &access, 1));
  }
  if (status.ok()) {
    // Fresh VRAM may hold another program's bytes: all of it is zeroed
    // before the file's bytes go in (holes and the tail stay zero).
    CUstream stream = AcquireStream();
    status = Check("cuMemsetD8Async", cu_.cuMemsetD8Async(view, 0, length, stream));
    for (size_t i = 0; i < copies.size() && status.ok(); ++i) {
      status = Check("cuMemcpyAsync",
                     cu_.cuMemcpyAsync(view + copies[i].destination_offset,
                                       base_ + copies[i].source_offset, copies[i].length, stream));
    }
    const absl::Status synced = Check("cuStreamSynchronize", cu_.cuStreamSynchronize(stream));
    if (status.ok()) status = synced;
    ReleaseStream(stream);
  }
  if (mapped) Check("cuMemUnmap", cu_.cuMemUnmap(view, length)).IgnoreError();
  if (view != 0) Check("cuMemAddressFree", cu_.cuMemAddressFree(view, length)).IgnoreError();
  int fd = -1;
  if (status.ok()) {
    status = Check("cuMemExportToShareableHandle",
                   cu_.cuMemExportToShareableHandle(&fd, handle,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  }
  if (!status.ok()) {
    Check("cuMemRelease", cu_.cuMemRelease(handle)).IgnoreError();
    return status;
  }
  return std::make_unique<Export>(this, handle, fd, size, length);
}

void CudaDevice::ReleaseExport(PhysicalHandle handle) {
  Check("cuMemRelease", cu_.cuMemRelease(handle)).IgnoreError();
  absl::MutexLock lock(&mu_);
  --exports_;
}

}  // namespace cudafs
