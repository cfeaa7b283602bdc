#include "fs/daemon/periodic_task.h"

#include <pthread.h>

#include <utility>

namespace cudafs {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> task)
    : PeriodicTask(interval, std::function<absl::Duration()>([interval, task = std::move(task)] {
                     task();
                     return interval;
                   })) {}

PeriodicTask::PeriodicTask(absl::Duration first, std::function<absl::Duration()> task,
                           const std::string& name)
    : thread_([this, first, task = std::move(task), name] {
        // At most 15 characters; a longer name is simply not set.
        if (!name.empty()) pthread_setname_np(pthread_self(), name.c_str());
        for (absl::Duration wait = first; !stop_.WaitForNotificationWithTimeout(wait);) {
          wait = task();
        }
      }) {}

PeriodicTask::~PeriodicTask() {
  stop_.Notify();
  thread_.join();
}

}  // namespace cudafs
