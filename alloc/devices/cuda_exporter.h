// CudaExporter: a CudaDevice's Exporter. A private copy goes into GPU
// memory of the other process's own, imported from its POSIX file
// descriptor and mapped here only while a copy made inside the GPU fills
// it; sharing hands the arena's own physical pieces out as POSIX file
// descriptors, which the other process imports and maps
// (cuMemImportFromShareableHandle, cuMemMap). Both only where the GPU
// supports those handles; an export holds the device's context while it
// lives. Why: docs/DESIGN.md, *Sharing files*.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_EXPORTER_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_EXPORTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "alloc/devices/exporter.h"

namespace cudafs {

class CudaDevice;

class CudaExporter final : public Exporter {
 public:
  // The exporter of `device`, which owns it.
  explicit CudaExporter(CudaDevice* device) : device_(device) {}

  absl::StatusOr<std::vector<CopyPiece>> PlanCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) const override;
  absl::Status FillCopy(absl::Span<const CopyMemory> memory,
                        absl::Span<const DeviceToDevice> copies) override;
  bool can_share() const override;
  // A range that no physical piece reaches past.
  bool Exclusive(DeviceRange range) const override;
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(
      uint64_t size, absl::Span<const DeviceRange> ranges) override;

 private:
  class Export;

  // FillCopy's work, with the context held.
  absl::Status FillImported(int memory, uint64_t memory_bytes,
                            absl::Span<const DeviceToDevice> copies);
  // Lets go of the context an Export held.
  void Released();

  CudaDevice* const device_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_EXPORTER_H_
