#include "fs/share/descriptor_closer.h"

#include <unistd.h>

#include <deque>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cudafs {
namespace {

// The lane of the users past kMaxLanes (no uid is -1).
constexpr uid_t kSharedLane = static_cast<uid_t>(-1);
// How long an idle lane's thread waits for more before it ends: a user
// who maps in a loop keeps one thread rather than starting one a map.
constexpr absl::Duration kIdle = absl::Seconds(1);

}  // namespace

struct DescriptorCloser::State {
  struct Lane {
    std::deque<std::pair<int, uid_t>> queue;  // descriptor, sender
    bool running = false;
  };

  mutable absl::Mutex mu;
  // node_hash_map: a lane's thread waits on its queue by address.
  absl::node_hash_map<uid_t, Lane> lanes ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uid_t, int> pending ABSL_GUARDED_BY(mu);
  uint64_t pending_total ABSL_GUARDED_BY(mu) = 0;
  uint64_t closed ABSL_GUARDED_BY(mu) = 0;

  // Starts the thread of lane `key` unless it runs. Threads that cannot
  // start now are tried again at the lane's next descriptor.
  static void StartLane(const std::shared_ptr<State>& state, uid_t key, Lane& lane)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
    if (lane.running) return;
    try {
      std::thread([state, key] { state->Run(key); }).detach();
      lane.running = true;
    } catch (const std::system_error&) {
    }
  }

  void Run(uid_t key) {
    mu.Lock();
    Lane& lane = lanes[key];
    for (;;) {
      mu.AwaitWithTimeout(absl::Condition(
                              +[](std::deque<std::pair<int, uid_t>>* queue) {
                                return !queue->empty();
                              },
                              &lane.queue),
                          kIdle);
      if (lane.queue.empty()) break;
      const auto [fd, sender] = lane.queue.front();
      lane.queue.pop_front();
      mu.Unlock();
      close(fd);
      mu.Lock();
      ++closed;
      --pending_total;
      if (--pending[sender] == 0) pending.erase(sender);
    }
    lanes.erase(key);
    mu.Unlock();
  }
};

DescriptorCloser::DescriptorCloser() : state_(std::make_shared<State>()) {}

DescriptorCloser::~DescriptorCloser() = default;

void DescriptorCloser::Close(int fd, uid_t uid) {
  absl::MutexLock lock(&state_->mu);
  const uid_t key =
      state_->lanes.contains(uid) || state_->lanes.size() < kMaxLanes ? uid : kSharedLane;
  State::Lane& lane = state_->lanes[key];
  lane.queue.emplace_back(fd, uid);
  ++state_->pending[uid];
  ++state_->pending_total;
  State::StartLane(state_, key, lane);
}

int DescriptorCloser::pending(uid_t uid) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->pending.find(uid);
  return it == state_->pending.end() ? 0 : it->second;
}

DescriptorCloser::Stats DescriptorCloser::stats() const {
  absl::MutexLock lock(&state_->mu);
  return {state_->closed, state_->pending_total};
}

}  // namespace cudafs
