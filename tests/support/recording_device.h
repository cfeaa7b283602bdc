// RecordingDevice: a DeviceWrapper that keeps the books the Device interface
// does not expose, so a test can check how the code under test used its
// device, and that can be told to misbehave. One decorator for every test
// (arena, page cache, pinned buffers); each reads only the books it needs.
//
// It records
//  - granules: which are committed, by how many successful Commit calls, and
//    a violation for each call that broke the interface's rules (Commit or
//    Decommit not granule-aligned, a granule committed twice or decommitted
//    while not committed, data moved in an uncommitted granule);
//  - transfers: Write batches (and the largest), bytes written, Read batches;
//  - host buffers: each one lent (zeroed) and not yet freed, with its size;
//    a free of one not lent, or with another size, fails the test, and so
//    does one still lent when the RecordingDevice is destroyed.
// On demand it fails Commits beyond a granule budget, holds Commit and
// Decommit at a gate, refuses host buffers (as a machine short of pinned
// memory does), answers Exclusive false below an offset, and states a batch
// limit of its own.
#ifndef CUDAFS_TESTS_SUPPORT_RECORDING_DEVICE_H_
#define CUDAFS_TESTS_SUPPORT_RECORDING_DEVICE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "alloc/devices/device_wrapper.h"
#include "alloc/devices/exporter.h"
#include "alloc/devices/null_device.h"
#include "gtest/gtest.h"

namespace cudafs {

class RecordingDevice final : public DeviceWrapper, private Exporter {
 public:
  // Over a NullDevice of no arena: for tests of host buffers alone.
  RecordingDevice() : RecordingDevice(std::make_unique<NullDevice>(0)) {}
  // Over `target`, which must outlive it.
  explicit RecordingDevice(Device* target)
      : DeviceWrapper(target), granule_(target->granule_size()) {}
  // Over `target`, which it owns.
  explicit RecordingDevice(std::unique_ptr<Device> target)
      : DeviceWrapper(std::move(target)), granule_(this->target()->granule_size()) {}

  ~RecordingDevice() override {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(live_.empty()) << live_.size() << " host buffers leaked";
  }

  std::string Describe() const override { return "recording " + target()->Describe(); }

  // Granules.

  absl::Status Commit(uint64_t offset, uint64_t length) override {
    WaitAtGate();
    absl::MutexLock lock(&mu_);
    CheckGranuleAligned("Commit", offset, length);
    const uint64_t granules = length / granule_;
    if (granules_left_.has_value()) {
      if (*granules_left_ < granules) return absl::ResourceExhaustedError("injected failure");
      *granules_left_ -= granules;
    }
    if (absl::Status status = DeviceWrapper::Commit(offset, length); !status.ok()) return status;
    ++commit_calls_;
    granules_committed_ += granules;
    for (uint64_t g = offset / granule_; g < (offset + length) / granule_; ++g) {
      if (!committed_.insert(g).second) {
        violations_.push_back(absl::StrCat("granule ", g, " committed twice"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Decommit(uint64_t offset, uint64_t length) override {
    WaitAtGate();
    absl::MutexLock lock(&mu_);
    CheckGranuleAligned("Decommit", offset, length);
    for (uint64_t g = offset / granule_; g < (offset + length) / granule_; ++g) {
      if (committed_.erase(g) == 0) {
        violations_.push_back(absl::StrCat("granule ", g, " decommitted but not committed"));
      }
    }
    return DeviceWrapper::Decommit(offset, length);
  }

  // Commits succeed for `granules` more granules; a Commit that would pass
  // that fails whole, until AllowCommits.
  void FailCommitsBeyond(uint64_t granules) {
    absl::MutexLock lock(&mu_);
    granules_left_ = granules;
  }
  void AllowCommits() {
    absl::MutexLock lock(&mu_);
    granules_left_.reset();
  }

  // While the gate is closed, Commit and Decommit wait in it.
  void CloseGate() {
    absl::MutexLock gate(&gate_mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    absl::MutexLock gate(&gate_mu_);
    gate_open_ = true;
  }
  void AwaitCallsAtGate(int n) {
    absl::MutexLock gate(&gate_mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) {
      return calls_at_gate_ == n;
    };
    gate_mu_.Await(absl::Condition(&arrived, &decltype(arrived)::operator()));
  }

  std::set<uint64_t> committed_granules() const {
    absl::MutexLock lock(&mu_);
    return committed_;
  }
  // Granules committed by successful Commits, and those calls.
  uint64_t granules_committed() const {
    absl::MutexLock lock(&mu_);
    return granules_committed_;
  }
  int commit_calls() const {
    absl::MutexLock lock(&mu_);
    return commit_calls_;
  }
  std::vector<std::string> violations() const {
    absl::MutexLock lock(&mu_);
    return violations_;
  }

  // Transfers.

  absl::Status Write(absl::Span<const HostToDevice> copies) override {
    for (const HostToDevice& c : copies) CheckCommitted("Write", c.device_offset, c.length);
    if (!copies.empty()) {
      ++write_batches_;
      uint64_t largest = largest_write_batch_.load();
      while (largest < copies.size() &&
             !largest_write_batch_.compare_exchange_weak(largest, copies.size())) {
      }
      for (const HostToDevice& c : copies) written_bytes_ += c.length;
    }
    return DeviceWrapper::Write(copies);
  }
  absl::Status Read(absl::Span<const DeviceToHost> copies) override {
    for (const DeviceToHost& c : copies) CheckCommitted("Read", c.device_offset, c.length);
    if (!copies.empty()) ++read_batches_;
    return DeviceWrapper::Read(copies);
  }
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override {
    for (const DeviceToDevice& c : copies) {
      CheckCommitted("Copy to", c.destination_offset, c.length);
      CheckCommitted("Copy from", c.source_offset, c.length);
    }
    return DeviceWrapper::Copy(copies);
  }
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override {
    for (const DeviceRange& r : ranges) CheckCommitted("Zero", r.offset, r.length);
    return DeviceWrapper::Zero(ranges);
  }

  uint64_t write_batches() const { return write_batches_; }
  uint64_t largest_write_batch() const { return largest_write_batch_; }
  uint64_t written_bytes() const { return written_bytes_; }
  uint64_t read_batches() const { return read_batches_; }

  // The batch limit stated from now on (the target's until set).
  void LimitBatchCopies(size_t max_batch_copies) { max_batch_copies_ = max_batch_copies; }
  size_t max_batch_copies() const override {
    return max_batch_copies_.value_or(DeviceWrapper::max_batch_copies());
  }

  // Exclusive is false for ranges starting below `offset`.
  void RefuseExclusiveBelow(uint64_t offset) { refuse_exclusive_below_ = offset; }

  // The target's exporter, but for that refusal.
  Exporter* exporter() override { return target()->exporter() != nullptr ? this : nullptr; }

  // Host buffers.

  void* AllocateHostBuffer(size_t length) override {
    absl::MutexLock lock(&mu_);
    if (refuse_host_buffers_) {
      ++refused_host_buffers_;
      return nullptr;
    }
    void* buffer = DeviceWrapper::AllocateHostBuffer(length);
    if (buffer == nullptr) return nullptr;
    std::memset(buffer, 0, length);
    live_.emplace(buffer, length);
    ++allocations_;
    return buffer;
  }

  void FreeHostBuffer(void* buffer, size_t length) override {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(buffer);
    ASSERT_NE(it, live_.end()) << "freed a host buffer not lent, or freed twice";
    EXPECT_EQ(it->second, length) << "freed with another size than it was asked for";
    live_.erase(it);
    ++frees_;
    DeviceWrapper::FreeHostBuffer(buffer, length);
  }

  // While refusing, AllocateHostBuffer returns null.
  void RefuseHostBuffers(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_host_buffers_ = refuse;
  }
  uint64_t refused_host_buffers() const {
    absl::MutexLock lock(&mu_);
    return refused_host_buffers_;
  }
  bool Lent(const void* buffer) const {
    absl::MutexLock lock(&mu_);
    return live_.contains(buffer);
  }
  // The size a lent buffer was asked for; 0 when it is not lent.
  size_t SizeOf(const void* buffer) const {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(buffer);
    return it == live_.end() ? 0 : it->second;
  }
  // Host buffers lent, and freed.
  int allocations() const {
    absl::MutexLock lock(&mu_);
    return allocations_;
  }
  int frees() const {
    absl::MutexLock lock(&mu_);
    return frees_;
  }

 private:
  absl::StatusOr<std::vector<CopyPiece>> PlanCopy(
      uint64_t size, absl::Span<const DeviceToDevice> copies) const override {
    return target()->exporter()->PlanCopy(size, copies);
  }
  absl::Status FillCopy(absl::Span<const CopyMemory> memory,
                        absl::Span<const DeviceToDevice> copies) override {
    return target()->exporter()->FillCopy(memory, copies);
  }
  bool can_share() const override { return target()->exporter()->can_share(); }
  bool Exclusive(DeviceRange range) const override {
    return range.offset >= refuse_exclusive_below_ && target()->exporter()->Exclusive(range);
  }
  absl::StatusOr<std::unique_ptr<ExportedMemory>> ExportShared(
      uint64_t size, absl::Span<const DeviceRange> ranges) override {
    return target()->exporter()->ExportShared(size, ranges);
  }

  void WaitAtGate() {
    absl::MutexLock gate(&gate_mu_);
    ++calls_at_gate_;
    gate_mu_.Await(absl::Condition(&gate_open_));
    --calls_at_gate_;
  }

  void CheckGranuleAligned(const char* what, uint64_t offset, uint64_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (offset % granule_ != 0 || length % granule_ != 0 || length == 0) {
      violations_.push_back(absl::StrCat(what, " of unaligned [", offset, ", +", length, ")"));
    }
  }

  void CheckCommitted(const char* what, uint64_t offset, uint64_t length) {
    if (length == 0) return;
    absl::MutexLock lock(&mu_);
    for (uint64_t g = offset / granule_; g <= (offset + length - 1) / granule_; ++g) {
      if (!committed_.contains(g)) {
        violations_.push_back(
            absl::StrCat(what, " [", offset, ", +", length, ") touches uncommitted granule ", g));
      }
    }
  }

  const uint64_t granule_;
  std::optional<size_t> max_batch_copies_;
  std::atomic<uint64_t> refuse_exclusive_below_{0};
  std::atomic<uint64_t> write_batches_{0};
  std::atomic<uint64_t> largest_write_batch_{0};
  std::atomic<uint64_t> written_bytes_{0};
  std::atomic<uint64_t> read_batches_{0};

  absl::Mutex gate_mu_;
  bool gate_open_ ABSL_GUARDED_BY(gate_mu_) = true;
  int calls_at_gate_ ABSL_GUARDED_BY(gate_mu_) = 0;

  mutable absl::Mutex mu_;
  std::set<uint64_t> committed_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> granules_left_ ABSL_GUARDED_BY(mu_);
  uint64_t granules_committed_ ABSL_GUARDED_BY(mu_) = 0;
  int commit_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const void*, size_t> live_ ABSL_GUARDED_BY(mu_);
  int allocations_ ABSL_GUARDED_BY(mu_) = 0;
  int frees_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_host_buffers_ ABSL_GUARDED_BY(mu_) = 0;
  bool refuse_host_buffers_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_RECORDING_DEVICE_H_
