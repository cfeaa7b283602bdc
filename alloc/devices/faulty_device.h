// FaultyDevice: a Device decorator that fails chosen calls, to test the
// filesystem's error paths: in unit tests, and in a running daemon started
// with CUDAFS_FAULT_INJECTION=1 (the root's user.cudafs.faults attribute
// then sets the plan; see fs/daemon/control_plane.h).
//
// A failed Commit is ResourceExhausted (the device is out of memory,
// ENOSPC); any other failed call is Internal (EIO) and does nothing, as a
// copy that never started. Host-buffer calls are never failed.
#ifndef CUDAFS_ALLOC_DEVICES_FAULTY_DEVICE_H_
#define CUDAFS_ALLOC_DEVICES_FAULTY_DEVICE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/devices/device_wrapper.h"

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
  // Each eligible call first waits this long, failing or not: a slow
  // device, so that a test sees what runs while a long operation does.
  absl::Duration delay = absl::ZeroDuration();
};

// "off", or comma-separated "probability=P" (0 to 1), "seed=N",
// "ops=commit+write+read+copy+zero" (default all) and "delay=MS" (0 to
// 60000 milliseconds), e.g. "probability=0.05,seed=7,ops=write+read".
// InvalidArgument naming the offending item otherwise.
absl::StatusOr<FaultPlan> ParseFaultPlan(absl::string_view text);

class FaultyDevice final : public DeviceWrapper {
 public:
  using DeviceWrapper::DeviceWrapper;

  // Starts `plan`'s random sequence from its seed.
  void SetPlan(const FaultPlan& plan);
  // Pauses (0) or resumes faults without restarting the random sequence.
  void SetProbability(double probability);
  // Calls failed so far.
  uint64_t injected() const;

  std::string Describe() const override { return "faulty " + target()->Describe(); }
  absl::Status Commit(uint64_t offset, uint64_t length) override;
  absl::Status Write(absl::Span<const HostToDevice> copies) override;
  absl::Status Read(absl::Span<const DeviceToHost> copies) override;
  absl::Status Copy(absl::Span<const DeviceToDevice> copies) override;
  absl::Status Zero(absl::Span<const DeviceRange> ranges) override;

 private:
  // Waits the plan's delay for `op`, then whether it fails.
  bool Fail(FaultOp op);

  mutable absl::Mutex mu_;
  FaultPlan plan_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_FAULTY_DEVICE_H_
