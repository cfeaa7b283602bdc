// FaultyDevice: a Device decorator that fails chosen calls, for
// fault-injection tests. A failed Commit is ResourceExhausted (the device is
// out of memory, ENOSPC); any other failed call is Internal (EIO) and does
// nothing, as a copy that never started.
#ifndef CUDAFS_TESTS_FAULTY_DEVICE_H_
#define CUDAFS_TESTS_FAULTY_DEVICE_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/synchronization/mutex.h"
#include "alloc/device.h"

namespace cudafs {

enum FaultOp : uint32_t {
  kFaultCommit = 1,
  kFaultWrite = 2,
  kFaultRead = 4,
  kFaultCopy = 8,
  kFaultZero = 16,
  kFaultAll = 31,
};

struct FaultPlan {
  double probability = 0;  // each eligible call fails with it; 0: no faults
  uint32_t ops = kFaultAll;
  uint64_t seed = 1;
};

class FaultyDevice final : public Device {
 public:
  explicit FaultyDevice(Device* inner) : inner_(inner) {}

  void SetPlan(const FaultPlan& plan) {
    absl::MutexLock lock(&mu_);
    plan_ = plan;
    rng_.seed(plan.seed);
  }
  // Pauses (0) or resumes faults without restarting the random sequence.
  void SetProbability(double probability) {
    absl::MutexLock lock(&mu_);
    plan_.probability = probability;
  }
  uint64_t injected() const {
    absl::MutexLock lock(&mu_);
    return injected_;
  }

  std::string Describe() const override { return "faulty " + inner_->Describe(); }
  uint64_t arena_size() const override { return inner_->arena_size(); }
  uint64_t granule_size() const override { return inner_->granule_size(); }
  absl::Status Commit(uint64_t offset, uint64_t length) override {
    if (Fail(kFaultCommit)) return absl::ResourceExhaustedError("injected: out of memory");
    return inner_->Commit(offset, length);
  }
  absl::Status Decommit(uint64_t offset, uint64_t length) override {
    return inner_->Decommit(offset, length);
  }
  absl::Status Write(absl::Span<const HostToDevice> copies) override {
    if (!copies.empty() && Fail(kFaultWrite)) return absl::InternalError("injected: write");
    return inner_->Write(copies);
  }
  absl::Status Read(absl::Span<const DeviceToHost> copies) override {
    if (!copies.empty() && Fail(kFaultRead)) return absl::InternalError("injected: read");
    return inner_->Read(copies);
  }
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override {
    if (!copies.empty() && Fail(kFaultCopy)) return absl::InternalError("injected: copy");
    return inner_->Copy(copies);
  }
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override {
    if (!ranges.empty() && Fail(kFaultZero)) return absl::InternalError("injected: zero");
    return inner_->Zero(ranges);
  }

 private:
  bool Fail(FaultOp op) {
    absl::MutexLock lock(&mu_);
    if (plan_.probability <= 0 || (plan_.ops & op) == 0) return false;
    if (std::uniform_real_distribution<double>(0, 1)(rng_) >= plan_.probability) return false;
    ++injected_;
    return true;
  }

  Device* const inner_;
  mutable absl::Mutex mu_;
  FaultPlan plan_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_FAULTY_DEVICE_H_
