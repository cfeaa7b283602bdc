// FakeCudaSharedBudget: the fake GPUs' memory as several processes share
// it, so that what one process holds is not free for another, as on a real
// GPU (the fake libcuda.so.1 of tests/fake_libcuda, where the daemon and
// its tests are separate processes).
//
// The state is a small file mapped shared by every process that opens it:
// one record per process (its pid, its start time and the bytes it holds on
// each GPU), each count an atomic. Taking memory is checked against the
// sum of all records under an exclusive flock(2) of the file (and a mutex
// among this process's threads, which share that lock); giving it back and
// reading what is used take no lock. A process that dies without freeing
// does not leak: the record of a pid that is gone (or now names another
// process, or a zombie) is cleared when memory runs short, when one asks
// what is used, and when a process opens the file.
//
// A process forked after Open() must not use its parent's budget (nor,
// as with the driver, the parent's CUDA state).
#ifndef CUDAFS_TESTS_SUPPORT_FAKE_CUDA_SHARED_BUDGET_H_
#define CUDAFS_TESTS_SUPPORT_FAKE_CUDA_SHARED_BUDGET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cudafs {

namespace fake_cuda_internal {
struct SharedLayout;
struct SharedRecord;
}  // namespace fake_cuda_internal

class FakeCudaSharedBudget {
 public:
  static constexpr int kMaxGpus = 16;
  static constexpr int kMaxProcesses = 256;

  // Opens the state at `path`, creating it for GPUs of `totals` bytes when
  // missing or empty, and takes a record for this process. Fails when the
  // file was made for other GPUs, or holds kMaxProcesses live processes.
  static absl::StatusOr<std::unique_ptr<FakeCudaSharedBudget>> Open(
      const std::string& path, const std::vector<uint64_t>& totals);
  // Gives back what this process still holds, and its record.
  ~FakeCudaSharedBudget();

  FakeCudaSharedBudget(const FakeCudaSharedBudget&) = delete;
  FakeCudaSharedBudget& operator=(const FakeCudaSharedBudget&) = delete;

  // Books `bytes` on `device` for this process if what all processes hold
  // there stays within `limit`; false (nothing booked) otherwise.
  bool Take(int device, uint64_t bytes, uint64_t limit);
  // Gives back `bytes` this process took on `device`.
  void Give(int device, uint64_t bytes);
  // What all live processes hold on `device`.
  uint64_t Used(int device);

  // How many GPUs the state was made for.
  int gpus() const { return gpus_; }

 private:
  FakeCudaSharedBudget(int fd, fake_cuda_internal::SharedLayout* layout, int gpus);

  // Clears the records of processes that are gone. Needs the file lock.
  void ReclaimDead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t SumOf(int device) const;

  const int fd_;  // the state file, for flock
  fake_cuda_internal::SharedLayout* const layout_;
  const int gpus_;
  fake_cuda_internal::SharedRecord* record_ = nullptr;  // this process's, set by Open
  // This process's threads share the file's lock: one of them at a time
  // holds it.
  absl::Mutex mu_;
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_FAKE_CUDA_SHARED_BUDGET_H_
