#include "fs/daemon/periodic_task.h"

#include <utility>

namespace cudafs {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> task)
    : thread_([this, interval, task = std::move(task)] {
        while (!stop_.WaitForNotificationWithTimeout(interval)) task();
      }) {}

PeriodicTask::~PeriodicTask() {
  stop_.Notify();
  thread_.join();
}

}  // namespace cudafs
