// DeviceWrapper: a Device that forwards every call to another one, so a
// decorator (fault injection, a test's bookkeeping) overrides only what it
// changes (LevelDB's EnvWrapper).
#ifndef CUDAFS_ALLOC_DEVICES_DEVICE_WRAPPER_H_
#define CUDAFS_ALLOC_DEVICES_DEVICE_WRAPPER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alloc/devices/device.h"

namespace cudafs {

class DeviceWrapper : public Device {
 public:
  // Forwards to `target`, which must outlive the wrapper.
  explicit DeviceWrapper(Device* target) : target_(target) {}
  // Forwards to `target` and owns it.
  explicit DeviceWrapper(std::unique_ptr<Device> target)
      : owned_(std::move(target)), target_(owned_.get()) {}

  Device* target() const { return target_; }

  std::string Describe() const override { return target_->Describe(); }
  uint64_t arena_size() const override { return target_->arena_size(); }
  uint64_t granule_size() const override { return target_->granule_size(); }
  std::string place() const override { return target_->place(); }
  std::vector<DevicePart> parts() const override { return target_->parts(); }
  std::optional<GpuMemory> PartMemory(size_t part) const override {
    return target_->PartMemory(part);
  }
  SpillReadiness* spill_readiness() override { return target_->spill_readiness(); }
  char* HostView(uint64_t offset) override { return target_->HostView(offset); }
  absl::Status Commit(uint64_t offset, uint64_t length) override {
    return target_->Commit(offset, length);
  }
  absl::Status Decommit(uint64_t offset, uint64_t length) override {
    return target_->Decommit(offset, length);
  }
  absl::Status Write(absl::Span<const HostToDevice> copies) override {
    return target_->Write(copies);
  }
  absl::Status Read(absl::Span<const DeviceToHost> copies) override {
    return target_->Read(copies);
  }
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override {
    return target_->Copy(copies);
  }
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override {
    return target_->Zero(ranges);
  }
  size_t max_batch_copies() const override { return target_->max_batch_copies(); }
  void* AllocateHostBuffer(size_t length) override { return target_->AllocateHostBuffer(length); }
  void FreeHostBuffer(void* buffer, size_t length) override {
    target_->FreeHostBuffer(buffer, length);
  }
  void RegisterHostMemory(void* memory, size_t length) override {
    target_->RegisterHostMemory(memory, length);
  }
  void UnregisterHostMemory(void* memory) override { target_->UnregisterHostMemory(memory); }
  Exporter* exporter() override { return target_->exporter(); }

 private:
  const std::unique_ptr<Device> owned_;
  Device* const target_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_DEVICE_WRAPPER_H_
