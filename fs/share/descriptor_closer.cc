#include "fs/share/descriptor_closer.h"

#include <unistd.h>

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace cudafs {

struct DescriptorCloser::State {
  mutable absl::Mutex mu;
  std::deque<std::pair<int, uid_t>> queue ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uid_t, int> pending ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;

  void Run() {
    for (;;) {
      std::pair<int, uid_t> next;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stopping || !s->queue.empty(); },
            this));
        if (queue.empty()) return;
        next = queue.front();
        queue.pop_front();
      }
      close(next.first);
      absl::MutexLock lock(&mu);
      if (--pending[next.second] == 0) pending.erase(next.second);
    }
  }
};

DescriptorCloser::DescriptorCloser() : state_(std::make_shared<State>()) {
  std::thread([state = state_] { state->Run(); }).detach();
}

DescriptorCloser::~DescriptorCloser() {
  // The thread closes what is queued and ends; it owns the state with us,
  // so a close stalled for good keeps only itself.
  absl::MutexLock lock(&state_->mu);
  state_->stopping = true;
}

void DescriptorCloser::Close(int fd, uid_t uid) {
  absl::MutexLock lock(&state_->mu);
  state_->queue.emplace_back(fd, uid);
  ++state_->pending[uid];
}

int DescriptorCloser::pending(uid_t uid) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->pending.find(uid);
  return it == state_->pending.end() ? 0 : it->second;
}

}  // namespace cudafs
