// PooledDevice: several devices (GPUs, and host memory to spill to) as one
// arena. Member i owns [base_i, base_i + its arena size), each starting on a
// GiB boundary, and is one part (Device::parts); every data call goes to the
// member owning its range, at that member's offsets, and a member that fails
// fails only the calls that touch its range. Copies between two GPUs go
// through pinned staging buffers; the spill member is a SpillDevice whose
// memory the GPUs copy into and out of directly. How and why:
// docs/DESIGN.md, *Several GPUs* and *Giving memory back*.
#ifndef CUDAFS_ALLOC_DEVICES_POOLED_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_POOLED_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "alloc/devices/device.h"
#include "alloc/devices/exporter.h"
#include "alloc/devices/pinned_buffer_pool.h"
#include "alloc/devices/spill_readiness.h"

namespace cudafs {

class PooledDevice final : public Device, public Exporter, public SpillReadiness {
 public:
  // Members' arenas start on multiples of this.
  static constexpr uint64_t kMemberAlignment = kGiB;

  // InvalidArgument without members, or when their granules differ.
  // `spill`, host memory with a HostView when given, becomes the last
  // member, a spill part (SpillDevice).
  static absl::StatusOr<std::unique_ptr<PooledDevice>> Create(
      std::vector<std::unique_ptr<Device>> members, std::unique_ptr<Device> spill = nullptr);
  // Staging buffers first, then the members in reverse order: the spill
  // lets go of the GPUs before they go.
  ~PooledDevice() override;

  std::string Describe() const override;
  uint64_t arena_size() const override { return arena_size_; }
  uint64_t granule_size() const override { return granule_; }
  // The members' places, joined by commas ("gpu0,gpu1,host").
  std::string place() const override;
  std::vector<DevicePart> parts() const override;
  std::optional<GpuMemory> PartMemory(size_t part) const override;
  // The spill member's, at its offsets; null without one.
  SpillReadiness* spill_readiness() override;
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Decommit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;
  size_t max_batch_copies() const override;
  void* AllocateHostBuffer(size_t length) override;
  void FreeHostBuffer(void* buffer, size_t length) override;
  void RegisterHostMemory(void* memory, size_t length) override;
  void UnregisterHostMemory(void* memory) override;
  // Each member's exporter, for its run of the copies or ranges; a member
  // without one fails the call with Unimplemented.
  Exporter* exporter() override { return this; }
  absl::StatusOr<std::vector<CopyPiece>> PlanCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) const override;
  absl::Status FillCopy(absl::Span<const CopyMemory> memory,
                        absl::Span<const DeviceToDevice> copies) override;
  bool can_share() const override;
  bool Exclusive(DeviceRange range) const override;
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(
      uint64_t size, absl::Span<const DeviceRange> ranges) override;

  Device& member(size_t i) const { return *members_[i].device; }

 private:
  // SpillReadiness, reached only through spill_readiness(): a pool without
  // a spill member has none to forward to.
  bool KeepReady(uint64_t bytes) override;
  uint64_t ready_bytes() const override;
  bool IsReady(uint64_t offset, uint64_t length) const override;

  struct Member {
    std::unique_ptr<Device> device;
    uint64_t base = 0;
    bool spill = false;
  };
  // Bytes a cross-member copy moves through host memory at a time.
  static constexpr size_t kStagingBytes = 8 * kMiB;

  PooledDevice(std::vector<Member> members, uint64_t arena_size, uint64_t granule)
      : members_(std::move(members)), arena_size_(arena_size), granule_(granule) {
    staging_.emplace(this, kStagingBytes);
  }

  // The member whose range holds [offset, offset + length), or
  // members_.size() when none holds all of it.
  size_t MemberOf(uint64_t offset, uint64_t length) const;
  absl::Status Straddles(uint64_t offset, uint64_t length) const;
  // Member `member`'s exporter; Unimplemented where it offers none.
  absl::StatusOr<Exporter*> MemberExporter(size_t member) const;
  // Runs `run` once per member with the items whose `offset` and `length`
  // lie in its range, their offsets made the member's own.
  template <typename T>
  absl::Status Route(absl::Span<const T> items, uint64_t T::*offset, size_t T::*length,
                     absl::FunctionRef<absl::Status(Device&, absl::Span<const T>)> run) const;
  // A private copy cut at granule boundaries into runs whose bytes one
  // member holds: each goes into a piece of the caller's memory on that
  // member's GPU, filled there. Unimplemented where bytes of two members
  // meet inside one granule (only when a member was full as the file grew).
  struct CopyRun {
    uint64_t start = 0;  // in the copy
    size_t member = 0;
    std::vector<DeviceToDevice> copies;  // member offsets, run-relative
  };
  absl::StatusOr<std::vector<CopyRun>> CopyRuns(absl::Span<const DeviceToDevice> copies) const;
  // A copy from one member to another: straight into or out of a member's
  // own memory (HostView), else through a pinned staging buffer.
  absl::Status CopyAcross(const DeviceToDevice& copy) const;

  std::vector<Member> members_;
  const uint64_t arena_size_;
  const uint64_t granule_;
  // For copies between GPUs, pinned for every GPU of the pool (this
  // device's AllocateHostBuffer); freed before the members.
  mutable std::optional<PinnedBufferPool> staging_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_POOLED_DEVICE_H_
