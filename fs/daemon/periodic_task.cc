#include "fs/daemon/periodic_task.h"

#include <utility>

namespace cudafs {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> task)
    : PeriodicTask(interval, std::function<absl::Duration()>([interval, task = std::move(task)] {
                     task();
                     return interval;
                   })) {}

PeriodicTask::PeriodicTask(absl::Duration first, std::function<absl::Duration()> task)
    : thread_([this, first, task = std::move(task)] {
        for (absl::Duration wait = first; !stop_.WaitForNotificationWithTimeout(wait);) {
          wait = task();
        }
      }) {}

PeriodicTask::~PeriodicTask() {
  stop_.Notify();
  thread_.join();
}

}  // namespace cudafs
