// RecordingNotifier: a KernelNotifier that records each call, in order, for
// a test to compare with what the kernel should have been told.
#ifndef CUDAFS_TESTS_SUPPORT_RECORDING_NOTIFIER_H_
#define CUDAFS_TESTS_SUPPORT_RECORDING_NOTIFIER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fs/core/kernel_notifier.h"

namespace cudafs {

class RecordingNotifier final : public KernelNotifier {
 public:
  void AttributesChanged(InodeNumber ino) override {
    absl::MutexLock lock(&mu_);
    attributes_changed_.push_back(ino);
  }
  void DataChanged(InodeNumber ino) override {
    absl::MutexLock lock(&mu_);
    data_changed_.push_back(ino);
  }

  std::vector<InodeNumber> attributes_changed() const {
    absl::MutexLock lock(&mu_);
    return attributes_changed_;
  }
  std::vector<InodeNumber> data_changed() const {
    absl::MutexLock lock(&mu_);
    return data_changed_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<InodeNumber> attributes_changed_ ABSL_GUARDED_BY(mu_);
  std::vector<InodeNumber> data_changed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_TESTS_SUPPORT_RECORDING_NOTIFIER_H_
