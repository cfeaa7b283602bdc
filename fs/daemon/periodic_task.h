// PeriodicTask: runs a function on a thread of its own every `interval`,
// or after whatever delay each run asks for, until destroyed. For the
// daemon's housekeeping (MemoryTrimmer, the idle growth trim of
// zero_message_open, the room keeper).
#ifndef CUDAFS_FS_DAEMON_PERIODIC_TASK_H_
#define CUDAFS_FS_DAEMON_PERIODIC_TASK_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace cudafs {

class PeriodicTask {
 public:
  // Starts the thread; the first run comes one interval from now.
  PeriodicTask(absl::Duration interval, std::function<void()> task);
  // The first run comes after `first`, each later one after the delay the
  // run before returned. The thread is called `name` (top -H shows it).
  PeriodicTask(absl::Duration first, std::function<absl::Duration()> task,
               const std::string& name = "");
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
