// CudaDevice: the arena in one NVIDIA GPU's memory, the GPU taken only while
// something is stored. Create only checks the GPU; the first Commit makes
// the context, the arena's addresses, the streams and the scatter kernel and
// pins the host buffers handed out so far, and once nothing has been
// committed for `idle_release` a thread releases all of it. Nothing is
// released while a data call runs (those are valid on committed ranges
// only). Why, and how physical memory is pieced and exported:
// docs/DESIGN.md, *The GPU* and *Sharing files*.
//
// Errors: out of VRAM, or of memory for a context, is ResourceExhausted
// (ENOSPC); a context that cannot be made for another reason fails that
// Commit with Internal (EIO) and one log line, and the next tries again;
// any other CUDA error is logged and returned as Internal. After a sticky
// error every data call fails with Internal until nothing is stored and the
// context is released (in a pool, once no other GPU keeps it for host
// memory pinned under it); the next Commit starts afresh.
#ifndef CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/cuda_context.h"
#include "alloc/devices/cuda_exporter.h"
#include "alloc/devices/pinned_host_ranges.h"
#include "alloc/devices/cuda_scatter.h"
#include "alloc/devices/cuda_streams.h"
#include "alloc/devices/device.h"
#include "alloc/devices/physical_pieces.h"

namespace cudafs {

struct CudaDriver;

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:65:00.0"
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// Every GPU the driver sees, with free memory (creates each device's
// context). Unavailable when no driver or no device.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

// The GPUs a device= value names: empty (GPU 0), "all", or indices ("1")
// and PCI bus ids ("0000:65:00.0", "65:00.0") joined by '+' (or an
// escaped ','). Unavailable when there is no driver or GPU;
// InvalidArgument when a GPU named does not exist or is named twice.
absl::StatusOr<std::vector<int>> ResolveCudaDevices(absl::string_view spec);
// The same through `driver` (a fake one in tests).
absl::StatusOr<std::vector<int>> ResolveCudaDevices(const CudaDriver& driver,
                                                    absl::string_view spec);

// Total memory of GPU `index`, without creating a context.
absl::StatusOr<uint64_t> CudaTotalMemory(int index);

struct CudaDeviceOptions {
  // How long the arena may hold no physical memory before the context and
  // every GPU resource are released; absl::InfiniteDuration() keeps them
  // once made.
  absl::Duration idle_release = absl::Seconds(5);
  // reserve=: Commit never leaves less than this much of the GPU's memory
  // free (for other programs), failing with ResourceExhausted instead.
  uint64_t reserve_bytes = 0;
};

class CudaDevice final : public Device {
 public:
  // An arena of `arena_size` bytes (rounded up to the allocation granule) on
  // GPU `index`, through the process's driver. Creates no context. Fails
  // with Unavailable when there is no driver or the GPU lacks the virtual
  // memory management API.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int index, uint64_t arena_size,
                                                            CudaDeviceOptions options = {});
  // The same through `driver` (a fake one in tests), which must outlive the
  // device.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(const CudaDriver& driver, int index,
                                                            uint64_t arena_size,
                                                            CudaDeviceOptions options);
  ~CudaDevice() override;

  std::string Describe() const override;
  std::string place() const override;
  std::optional<GpuMemory> PartMemory(size_t part) const override;
  uint64_t arena_size() const override { return gpu_.arena_size; }
  uint64_t granule_size() const override { return gpu_.granule; }
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;
  // What one launch of the scatter kernel takes.
  size_t max_batch_copies() const override { return CudaScatter::kMaxPieces; }
  void* AllocateHostBuffer(size_t length) override;
  void FreeHostBuffer(void* buffer, size_t length) override;
  void RegisterHostMemory(void* memory, size_t length) override;
  void UnregisterHostMemory(void* memory) override;
  // Copies into other processes' GPU memory and sharing (CudaExporter).
  Exporter* exporter() override { return &exporter_; }

  // The largest physical allocation Commit makes.
  static constexpr uint64_t kMaxPieceBytes = 32 * kMiB;

  // One physical allocation of the arena as it passes to a successor
  // process (cudafs --upgrade): where it is mapped, which granules hold
  // data, and the allocation as a POSIX file descriptor.
  struct HandedPiece {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t committed = 0;  // a bit per granule (PhysicalPieces)
    bool exported = false;
    int fd = -1;  // the caller's to close
  };
  // Every piece the arena holds, exported (or, for a piece adopted, its
  // descriptor again). FailedPrecondition where this GPU cannot export its
  // memory. The pieces stay this device's too: the allocation lives while
  // either process holds it.
  absl::StatusOr<std::vector<HandedPiece>> HandOverPieces();
  // FailedPrecondition, saying why, where this GPU cannot export its
  // memory (HandOverPieces would fail).
  absl::Status CanHandOver() const;
  // From now on calls `watcher` with each piece mapped (true; exported,
  // its descriptor the watcher's to close), before the Commit that mapped
  // it returns, and with each piece released (false; its offset alone),
  // as it leaves the table, before another can be mapped there: under
  // the device's lock, so the watcher must not call the device. Mapping
  // fails if the export does. REQUIRES: before the first Commit from
  // another thread; CanHandOver().
  void WatchPieces(std::function<void(bool mapped, const HandedPiece& piece)> watcher);
  // Maps the pieces another process's arena on this GPU handed over, at
  // the same offsets and with the same granules committed, creating the
  // context. Takes every descriptor: each piece keeps its own until it is
  // released. All or nothing: on failure this device holds none of them
  // (the other process's hold is untouched).
  absl::Status AdoptPieces(absl::Span<const HandedPiece> pieces);
  const std::string& pci_bus_id() const { return gpu_.pci_bus_id; }
  const CudaDeviceOptions& options() const { return options_; }

  struct Stats {
    bool has_context = false;
    uint64_t contexts_created = 0;
    uint64_t physical_bytes = 0;    // VRAM held, committed granules or not
    uint64_t pieces = 0;            // physical allocations held
    uint64_t scattered_writes = 0;  // writes that went through the kernel
  };
  Stats stats() const;

 private:
  using Piece = PhysicalPieces::Piece;

  // What Create learns of the GPU.
  struct Traits {
    int device = 0;  // CUdevice
    uint64_t granule = 0;
    uint64_t arena_size = 0;
    bool shareable = false;          // physical memory exportable as POSIX fds
    bool kernel_reads_host = false;  // pinned memory reachable at its host address
    std::string description;
    std::string pci_bus_id;  // "0000:65:00.0": how another process finds this GPU
  };

  CudaDevice(const CudaDriver& driver, Traits traits, CudaDeviceOptions options);

  // Creates the context and everything made under it; on failure nothing
  // of it remains.
  absl::Status CreateContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the context and everything made under it.
  void DestroyContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The background thread: DestroyContext once the arena held nothing for
  // idle_release.
  void ReleaseWhenIdle();
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return context_.held() && pieces_.empty() && in_flight_ == 0 && exports_ == 0;
  }

  // WatchPieces'; empty: none.
  std::function<void(bool mapped, const HandedPiece& piece)> watcher_;

  // The exporter works on the pieces, the context and the streams under
  // this device's lock, as the device's own calls do.
  friend class CudaExporter;

  // Lets go of the context an ExportedMemory held.
  void ReleaseExport();
  // Exclusive, and with `committed` also backed whole by committed pieces
  // (PhysicalPieces::Exclusive, within the arena).
  bool ExclusiveLocked(DeviceRange range, bool committed) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status InRange(uint64_t offset, uint64_t length) const;
  // Whether the context is held and current, for pinning host memory now.
  bool EnterIfHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ResourceExhausted when mapping `wanted` more bytes would eat into
  // reserve_bytes; else counts them as pending until the caller has mapped
  // them (and takes reserve_pending_ down by them).
  absl::Status KeepReserve(uint64_t wanted);
  // Creates and maps a physical allocation at [offset, offset + length).
  absl::StatusOr<PhysicalPieces::Handle> MapPiece(uint64_t offset, uint64_t length);
  void UnmapPiece(const Piece& piece);
  // PhysicalPieces::Uncommit, telling the watcher of the pieces emptied.
  std::vector<Piece> Uncommit(uint64_t offset, uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CudaDriver& cu_;
  const CudaDeviceOptions options_;
  const Traits gpu_;
  // More than the FUSE worker threads, so a batch rarely waits.
  static constexpr int kStreams = 32;

  // Taken before the host ranges' lock where both are held.
  mutable absl::Mutex mu_;
  // Held from the first Commit until the arena has been idle. Retained and
  // released under mu_; data operations use it without the lock (a
  // committed range keeps it).
  CudaContext context_;
  CudaStreams streams_;
  CudaScatter scatter_;
  PinnedHostRanges host_ranges_;
  // CUdeviceptr of the reserved arena while the context lives; written under
  // mu_ only while nothing is committed, so the data operations that read it
  // need no lock.
  unsigned long long base_ = 0;
  // The physical allocations mapped into the arena.
  PhysicalPieces pieces_ ABSL_GUARDED_BY(mu_);
  // Pieces out of the table that Decommit is unmapping outside mu_: a
  // commit there waits (the driver maps nothing over a mapped range).
  std::vector<DeviceRange> unmapping_ ABSL_GUARDED_BY(mu_);
  // Commits and Decommits running driver calls outside mu_.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // ExportedMemory objects alive: each keeps the context.
  int exports_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t contexts_created_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread releaser_;

  // Bytes of commits between KeepReserve and their mapping.
  std::atomic<uint64_t> reserve_pending_{0};
  CudaExporter exporter_{this};
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_CUDA_DEVICE_H_
