// ExportedMemory: a file's own memory (Exporter::ExportShared), handed to
// another process that maps it with no copy of its own. It is
// handed over as POSIX file descriptors, one per physical piece: memfds for
// the host device, CUDA allocations exported as file descriptors for the
// GPU. The importer maps the pieces back to back, in order. The memory
// lives while this object, or an importer's mapping, holds it.
#ifndef CUDAFS_ALLOC_DEVICES_EXPORTED_MEMORY_H_
#define CUDAFS_ALLOC_DEVICES_EXPORTED_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace cudafs {

struct ExportedPiece {
  int fd;         // owned by the ExportedMemory; send a dup, or the fd itself
  uint64_t size;  // bytes this piece maps: a multiple of the device's unit
  // The PCI bus id of the GPU whose memory it is ("0000:65:00.0"; kCuda),
  // or empty: the importer's device numbering may differ from ours
  // (CUDA_VISIBLE_DEVICES), the bus id does not.
  std::string pci_bus_id;
};

class ExportedMemory {
 public:
  enum class Kind {
    kHost,  // memfds: mmap them
    kCuda,  // CUDA allocations: cuMemImportFromShareableHandle + cuMemMap
  };

  virtual ~ExportedMemory() = default;

  virtual Kind kind() const = 0;
  // Bytes of data: the pieces may hold more (rounded up), zeros.
  virtual uint64_t size() const = 0;
  virtual absl::Span<const ExportedPiece> pieces() const = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_EXPORTED_MEMORY_H_
