// PeriodicTask: runs a function on a thread of its own every `interval`
// until destroyed. For the daemon's housekeeping (MemoryTrimmer, the idle
// growth trim of zero_message_open).
#ifndef CUDAFS_FS_DAEMON_PERIODIC_TASK_H_
#define CUDAFS_FS_DAEMON_PERIODIC_TASK_H_

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace cudafs {

class PeriodicTask {
 public:
  // Starts the thread; the first run comes one interval from now.
  PeriodicTask(absl::Duration interval, std::function<void()> task);
  // Stops the thread, waiting for a run in progress.
  ~PeriodicTask();

  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_PERIODIC_TASK_H_
