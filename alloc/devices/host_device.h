// HostDevice: the arena in host memory. Used by the tests, by CI, and as the
// fallback on machines without a usable GPU.
//
// The arena is one anonymous mapping reserved without backing
// (MAP_NORESERVE); Commit faults granules in and Decommit hands them back to
// the kernel, so resident memory follows what is stored, like tmpfs.
// ExportCopy copies into a memfd, which another process maps.
#ifndef CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "alloc/devices/device.h"

namespace cudafs {

class HostDevice final : public Device {
 public:
  static constexpr uint64_t kGranule = kDefaultGranuleBytes;

  // Reserves `arena_size` bytes of address space (rounded up to a granule).
  static absl::StatusOr<std::unique_ptr<HostDevice>> Create(uint64_t arena_size);
  ~HostDevice() override;

  std::string Describe() const override;
  uint64_t arena_size() const override { return size_; }
  uint64_t granule_size() const override { return kGranule; }
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) override;

 private:
  HostDevice(char* base, uint64_t size) : base_(base), size_(size) {}

  char* const base_;
  const uint64_t size_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_HOST_DEVICE_H_
