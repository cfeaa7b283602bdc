// Device: where file bytes are stored. The filesystem addresses storage only
// through arena offsets, so the same core runs on GPU memory (the product),
// host memory (tests, CI, machines without a GPU) or any future backend.
//
// Promises every implementation keeps:
//  - The arena is a linear range [0, arena_size()) of byte offsets. Only
//    committed granules may be read or written.
//  - Each transfer call takes a batch and returns once every copy in it is
//    complete. Implementations may run the copies of a batch concurrently and
//    in any order (the CUDA device pipelines them over several streams), so
//    the copies of one batch must not overlap each other.
//  - All methods are thread-safe; concurrent batches on disjoint ranges are
//    allowed and expected.
//  - Errors come back as absl::Status: ResourceExhausted when memory cannot
//    be had (the caller turns it into ENOSPC), anything else is an I/O error.
#ifndef CUDAFS_ALLOC_DEVICES_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "alloc/base/sizes.h"

namespace cudafs {

// Marks the calling thread as one no request waits on (the write-back
// flusher): devices wait for their hardware there asleep, never spinning,
// so request threads keep the cores.
void MarkBackgroundThread();
bool IsBackgroundThread();

// Host memory -> arena.
struct HostToDevice {
  uint64_t device_offset;
  const void* source;
  size_t length;
};

// Arena -> host memory.
struct DeviceToHost {
  void* destination;
  uint64_t device_offset;
  size_t length;
};

// Arena -> arena (copy_file_range without a round trip through the host).
struct DeviceToDevice {
  uint64_t destination_offset;
  uint64_t source_offset;
  size_t length;
};

class Exporter;
class SpillReadiness;

// A range of arena bytes.
struct DeviceRange {
  uint64_t offset;
  size_t length;
};

// A range of the arena whose memory comes and fails apart (each GPU of a
// PooledDevice): no block may straddle two, and each is accounted on its
// own.
struct DevicePart {
  DeviceRange range;
  // One line for --stats and the logs (the device's Describe()).
  std::string description;
  // Device::place() of the memory behind it.
  std::string place;
  // Host memory that takes bytes only where no other part can (spill=): the
  // arena offers it last, and data moves there to give a GPU's memory back
  // to other programs.
  bool spill = false;
};

// The granule of the devices free to choose one (host, null): what the CUDA
// driver recommends for VRAM, so that every backend commits and accounts
// alike.
inline constexpr uint64_t kDefaultGranuleBytes = 2 * kMiB;

class Device {
 public:
  virtual ~Device() = default;

  // One line for logs and --list-devices, e.g. "host memory".
  virtual std::string Describe() const = 0;

  // Bytes of address space in the arena. Fixed for the device's lifetime.
  virtual uint64_t arena_size() const = 0;

  // A short name for where this device keeps bytes, for users' scripts
  // (user.cudafs.where, --stats): "gpu0" (the CUDA ordinal), "host".
  virtual std::string place() const = 0;

  // The arena's parts (DevicePart), in order and disjoint. One by default:
  // the whole arena, named by Describe() and place().
  virtual std::vector<DevicePart> parts() const;

  // The memory of the GPU behind part `part`, as its driver reports it now
  // (other programs' allocations included), and the reserve= to keep free
  // there. Nullopt where the part is no GPU, or while this process holds
  // no context on it (then nothing of ours is there, and asking would
  // take memory).
  struct GpuMemory {
    uint64_t free = 0;
    uint64_t total = 0;
    uint64_t reserve = 0;
    // "0000:65:00.0": the GPU as any process names it, whatever its
    // CUDA_VISIBLE_DEVICES (a program asking for room names it so).
    std::string pci_bus_id;
  };
  virtual std::optional<GpuMemory> PartMemory(size_t /*part*/) const { return std::nullopt; }
  // What this device offers to keep host memory ready for moves into its
  // spill parts (spill_readiness.h); null where it has none (the default).
  virtual SpillReadiness* spill_readiness() { return nullptr; }

  // Where the arena's bytes are plain memory of this process (the host
  // device): the address of arena byte `offset`, so that a pool copies
  // into and out of it with a memcpy rather than a device call. Null by
  // default.
  virtual char* HostView(uint64_t /*offset*/) { return nullptr; }

  // Unit of physical backing: Commit/Decommit ranges are multiples of it
  // and aligned to it.
  virtual uint64_t granule_size() const = 0;

  // Backs [offset, offset + length) with physical memory. Fails with
  // ResourceExhausted when the memory cannot be had; then nothing of the
  // range is committed. Content of a newly committed granule is unspecified.
  virtual absl::Status Commit(uint64_t offset, uint64_t length) = 0;

  // Gives the physical memory behind [offset, offset + length) back.
  virtual absl::Status Decommit(uint64_t offset, uint64_t length) = 0;

  virtual absl::Status Write(absl::Span<const HostToDevice> copies) = 0;
  virtual absl::Status Read(absl::Span<const DeviceToHost> copies) = 0;
  virtual absl::Status Copy(absl::Span<const DeviceToDevice> copies) = 0;
  virtual absl::Status Zero(absl::Span<const DeviceRange> ranges) = 0;

  // The most copies one transfer call carries at full speed: a caller with
  // more splits them into batches of this many. Larger batches still work,
  // only slower (the CUDA device then no longer takes them in one kernel
  // launch). Unlimited by default.
  virtual size_t max_batch_copies() const { return std::numeric_limits<size_t>::max(); }

  // Called with a buffer the caller will pass to Write/Read many times, so a
  // device that copies faster from registered memory can ask for pinned host
  // memory. The default is plain heap memory. Page-aligned; null when the
  // memory cannot be had. Freed with FreeHostBuffer (see PinnedBuffer).
  virtual void* AllocateHostBuffer(size_t length);
  virtual void FreeHostBuffer(void* buffer, size_t length);

  // For memory someone else allocated that the caller will pass to
  // Write/Read many times (libfuse's io_uring request buffers): a device
  // that copies faster from registered memory may pin it. Best effort, as
  // unregistered memory works too, only slower. UnregisterHostMemory must
  // come before the memory is freed. The defaults do nothing.
  virtual void RegisterHostMemory(void* memory, size_t length);
  virtual void UnregisterHostMemory(void* memory);

  // What this device offers to hand its bytes to other processes
  // (exporter.h); null where it cannot (the default).
  virtual Exporter* exporter() { return nullptr; }
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_DEVICE_H_
