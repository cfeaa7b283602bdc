#include "alloc/devices/commit_pool.h"

#include <algorithm>
#include <utility>

namespace cudafs {

size_t CommitPool::DefaultThreads() {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<size_t>(cores / 2, 1, 8);
}

CommitPool::CommitPool(size_t threads) : threads_(std::max<size_t>(1, threads)) {}

CommitPool::~CommitPool() {
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
}

void CommitPool::RunSlice(Job* job) {
  const size_t i = job->next++;
  if (job->next == job->slices.size()) queue_.erase(std::find(queue_.begin(), queue_.end(), job));
  const DeviceRange slice = job->slices[i];
  mu_.Unlock();
  absl::Status status = job->device->Commit(slice.offset, slice.length);
  mu_.Lock();
  job->results[i] = std::move(status);
  ++job->finished;
}

void CommitPool::Work() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.Await(absl::Condition(
        +[](CommitPool* pool)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return pool->stopping_ || !pool->queue_.empty(); },
        this));
    if (queue_.empty()) return;  // stopping, and nothing is left to do
    RunSlice(queue_.front());
  }
}

absl::Status CommitPool::Commit(Device* device, uint64_t offset, uint64_t length, uint64_t align) {
  const uint64_t units = length / align;
  const uint64_t slices = std::min<uint64_t>(threads_, units);
  if (slices <= 1) return device->Commit(offset, length);
  Job job;
  job.device = device;
  // Slices differ by a unit at most, so that they finish together.
  for (uint64_t s = 0, at = offset; s < slices; ++s) {
    const uint64_t n = (units / slices + (s < units % slices ? 1 : 0)) * align;
    job.slices.push_back({at, n});
    at += n;
  }
  job.results.resize(slices);
  {
    absl::MutexLock lock(&mu_);
    while (workers_.size() + 1 < threads_) workers_.emplace_back([this] { Work(); });
    queue_.push_back(&job);
    // The caller commits slices too rather than wait idle.
    while (job.next < job.slices.size()) RunSlice(&job);
    mu_.Await(absl::Condition(
        +[](Job* waited) { return waited->finished == waited->slices.size(); }, &job));
  }
  absl::Status first;
  for (const absl::Status& result : job.results) first.Update(result);
  if (first.ok()) return first;
  for (size_t s = 0; s < job.slices.size(); ++s) {
    // Nothing more to do when it fails: the caller commits the range again
    // before any use.
    if (job.results[s].ok())
      device->Decommit(job.slices[s].offset, job.slices[s].length).IgnoreError();
  }
  return first;
}

}  // namespace cudafs
