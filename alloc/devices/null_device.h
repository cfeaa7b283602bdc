// NullDevice: stores nothing. Writes are dropped, reads return zeros and
// commits always succeed, so a mount on it (backend=null) measures what
// FUSE and the filesystem core cost without any data movement: the floor
// against which the real devices' throughput is reported. Not for data.
// Tests derive from it for a device whose storage they do not use.
#ifndef CUDAFS_ALLOC_DEVICES_NULL_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_NULL_DEVICE_H_

#include "alloc/devices/device.h"

namespace cudafs {

class NullDevice : public Device {
 public:
  explicit NullDevice(uint64_t arena_size);

  std::string Describe() const override { return "null device (data is discarded)"; }
  std::string place() const override { return "null"; }
  uint64_t arena_size() const override { return arena_size_; }
  uint64_t granule_size() const override { return kGranule; }
  absl::Status Commit(uint64_t, uint64_t) override { return absl::OkStatus(); }
  absl::Status Decommit(uint64_t, uint64_t) override { return absl::OkStatus(); }
  absl::Status Write(absl::Span<const HostToDevice>) override { return absl::OkStatus(); }
  // Zero-fills the destinations: the one copy a reader cannot do without.
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice>) override { return absl::OkStatus(); }
  absl::Status Zero(absl::Span<const DeviceRange>) override { return absl::OkStatus(); }

 private:
  static constexpr uint64_t kGranule = kDefaultGranuleBytes;
  const uint64_t arena_size_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_NULL_DEVICE_H_
