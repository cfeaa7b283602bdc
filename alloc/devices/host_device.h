// HostDevice: the arena in host memory. Used by the tests, by CI, as the
// fallback on machines without a usable GPU, and as the spill tier.
//
// The arena holds no memory at first; Commit allocates granules and
// Decommit hands them back to the kernel, so the memory held follows what is
// stored, like tmpfs. Two backings (Backing): a memfd, for the host
// backend, or anonymous memory in huge pages, for the spill tier.
// FillCopy writes into another process's memfd, only where its pages are
// allocated (the daemon's writes must not be what allocates them).
// ExportShared moves each range into a memfd of its own, sealed against
// resizing (importers hold it open for writing), mapped over the arena in
// place of the arena's own memory (once; later exports hand out the same
// memfd), and the range goes back to it when it is decommitted: the
// memfd's pages are released then (importers read zeros), and the memfd
// lives on only in the importers' mappings.
#ifndef CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "alloc/devices/device.h"
#include "alloc/devices/exporter.h"

namespace cudafs {

class HostDevice final : public Device, public Exporter {
 public:
  static constexpr uint64_t kGranule = kDefaultGranuleBytes;

  enum class Backing {
    // A memfd as large as the arena, committed by fallocate, punched to
    // decommit; transfers are pwrite, pread and copy_file_range on it, the
    // kernel copying as for tmpfs, never faulting pages into this process
    // (which costs more than the copy). HostView maps it shared.
    kMemfd,
    // Anonymous memory, committed by faulting it in, in huge pages where
    // the kernel has them: GPUs pin those many times faster than a memfd's
    // pages (docs/BENCHMARKS.md); transfers memcpy through HostView.
    kHugePages,
  };

  // Reserves `arena_size` bytes (rounded up to a granule).
  static absl::StatusOr<std::unique_ptr<HostDevice>> Create(uint64_t arena_size,
                                                            Backing backing = Backing::kMemfd);
  // The arena over `memfd`, the memory of another HostDevice of the memfd
  // backing (memory()), which a process that took it over keeps as it
  // was: a successor's filesystem loads its image there
  // (Filesystem::LoadImage). Owns the descriptor, closing it on failure
  // too. InvalidArgument for a descriptor that is not such a memfd.
  static absl::StatusOr<std::unique_ptr<HostDevice>> Adopt(int memfd);
  ~HostDevice() override;

  // The memfd holding the arena's bytes, to be handed to a successor; -1
  // for anonymous memory.
  int memory() const { return memory_; }

  std::string Describe() const override;
  std::string place() const override { return "host"; }
  char* HostView(uint64_t offset) override { return base_ + offset; }
  uint64_t arena_size() const override { return size_; }
  uint64_t granule_size() const override { return kGranule; }
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;
  Exporter* exporter() override { return this; }
  absl::StatusOr<std::vector<CopyPiece>> PlanCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) const override;
  absl::Status FillCopy(absl::Span<const CopyMemory> memory,
                        absl::Span<const DeviceToDevice> copies) override;
  bool can_share() const override { return true; }
  bool Exclusive(DeviceRange range) const override;
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(
      uint64_t size, absl::Span<const DeviceRange> ranges) override;

 private:
  // A range of the arena mapped from a memfd of its own (ExportShared).
  struct Shared {
    int fd = -1;
    uint64_t length = 0;
    uint64_t committed = 0;  // bytes of it not yet decommitted
  };

  HostDevice(int memory, char* base, uint64_t size) : memory_(memory), base_(base), size_(size) {}
  // Maps `size` bytes, granule-aligned, of `memory` (-1: anonymous) as a
  // device; closes `memory` on failure.
  static absl::StatusOr<std::unique_ptr<HostDevice>> Map(int memory, uint64_t size);

  bool WholeGranules(DeviceRange range) const;
  // Whether no shared range overlaps `range` but one equal to it.
  bool NotSharedOtherwise(DeviceRange range) const ABSL_SHARED_LOCKS_REQUIRED(shared_mu_);
  // Whether no shared range overlaps [offset, offset + length).
  bool Plain(uint64_t offset, uint64_t length) const ABSL_SHARED_LOCKS_REQUIRED(shared_mu_);
  // Whether the bytes of [offset, offset + length) are in memory_ at the
  // same offsets, for the kernel to move.
  bool ByKernel(uint64_t offset, uint64_t length) const ABSL_SHARED_LOCKS_REQUIRED(shared_mu_);
  // The memfd holding [offset, offset + length), made on first use.
  absl::StatusOr<int> SharedMemory(uint64_t offset, uint64_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_mu_);

  const int memory_;  // the memfd holding the arena's bytes, owned; -1: anonymous
  char* const base_;  // the arena's mapping
  const uint64_t size_;
  mutable absl::Mutex shared_mu_;
  // Arena offset -> the shared range starting there.
  absl::btree_map<uint64_t, Shared> shared_ ABSL_GUARDED_BY(shared_mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_
