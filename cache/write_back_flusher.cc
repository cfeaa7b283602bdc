#include "cache/write_back_flusher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "alloc/base/log.h"
#include "alloc/devices/device.h"

namespace cudafs {

WriteBackFlusher::WriteBackFlusher(PageCache* cache, FlushFile flush_file,
                                   absl::Duration interval)
    : cache_(cache), flush_file_(std::move(flush_file)), interval_(interval) {
  if (cache_->enabled()) thread_ = std::thread([this] { Loop(); });
}

WriteBackFlusher::~WriteBackFlusher() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  cache_->Wake();
  thread_.join();
  for (uint64_t ino : cache_->DirtyFiles(absl::ZeroDuration())) flush_file_(ino).IgnoreError();
}

void WriteBackFlusher::Loop() {
  // Nobody waits on a write-back: its copies must not take a core.
  MarkBackgroundThread();
  bool reported = false;  // one log line per run of failures
  while (!stop_.HasBeenNotified()) {
    const bool pressure = cache_->WaitForPressure(interval_);
    if (stop_.HasBeenNotified()) break;
    bool failed = false;
    for (uint64_t ino : cache_->DirtyFiles(pressure ? absl::ZeroDuration() : interval_)) {
      absl::Status status = flush_file_(ino);
      if (status.ok()) continue;
      failed = true;
      if (!reported) LogError(absl::StrCat("write-back of inode ", ino, ": ", status.ToString()));
      reported = true;
    }
    if (!failed) reported = false;
    // Pages that cannot be written stay dirty; do not spin on them.
    if (failed && pressure) absl::SleepFor(interval_);
  }
}

}  // namespace cudafs
