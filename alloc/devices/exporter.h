// Exporter: what a device offers (Device::exporter) to hand arena bytes to
// another process: a private copy made in memory that process allocated,
// so that it pays for it as for a read(2) into a buffer of its own, and
// the physical memory itself, shared, where the device can give it out.
// A device without one (the null device) can do neither.
//
// Thread-safe, as the device it belongs to; it lives as long as that device.
#ifndef CUDAFS_ALLOC_DEVICES_EXPORTER_H_
#define CUDAFS_ALLOC_DEVICES_EXPORTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "alloc/devices/device.h"
#include "alloc/devices/exported_memory.h"

namespace cudafs {

class Exporter {
 public:
  virtual ~Exporter() = default;

  // A piece of memory a private copy goes into, back to back with the
  // others: of `kind` (on GPU `pci_bus_id` for kCuda) and `bytes` long.
  struct CopyPiece {
    ExportedMemory::Kind kind = ExportedMemory::Kind::kHost;
    std::string pci_bus_id;
    uint64_t bytes = 0;
  };
  // A piece of memory brought for a copy: its descriptor, which the caller
  // checked cannot block, and its length.
  struct CopyMemory {
    int fd = -1;
    uint64_t bytes = 0;
  };
  // The pieces a copy of `size` bytes (> 0), read by `copies`, goes into;
  // Unimplemented where this device cannot fill such memory after all (a
  // GPU without POSIX file-descriptor handles).
  virtual absl::StatusOr<std::vector<CopyPiece>> PlanCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) const = 0;
  // Fills `memory`, the pieces PlanCopy asked for, with zeros but where
  // `copies` put arena bytes (their destination offsets count from the
  // first piece's start, below the pieces' sum). FailedPrecondition when
  // the pieces are not what PlanCopy asks for these copies (the bytes
  // moved since); Unimplemented as PlanCopy.
  virtual absl::Status FillCopy(absl::Span<const CopyMemory> memory,
                                absl::Span<const DeviceToDevice> copies) = 0;

  // Whether ExportShared can hand memory out at all.
  virtual bool can_share() const = 0;
  // Whether the physical memory behind `range` (whole granules, committed
  // or not) backs no byte outside it: committed, it can be handed out
  // (ExportShared) showing nothing else; free, a block there will be.
  virtual bool Exclusive(DeviceRange range) const = 0;
  // The physical memory itself behind `ranges` (each committed and
  // Exclusive), in order, for another process to map with no copy: writes
  // on either side show on the other. `size` is the bytes of data, at most
  // the ranges' sum. Once the arena frees a range, the device takes back
  // what it can of that memory (zeroed; host memory released) and backs
  // the range with other memory, never this. Unimplemented where
  // can_share() is false.
  virtual absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(
      uint64_t size, absl::Span<const DeviceRange> ranges) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_EXPORTER_H_
