#include "alloc/devices/spill_device.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "alloc/base/log.h"

namespace cudafs {

SpillDevice::SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus)
    : SpillDevice(std::move(host), std::move(gpus), Options()) {}

SpillDevice::SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus, Options options)
    : DeviceWrapper(std::move(host)),
      gpus_(std::move(gpus)),
      options_(options),
      pool_(options.commit_threads) {
  absl::MutexLock lock(&mu_);
  chunks_.resize((arena_size() + options_.chunk - 1) / options_.chunk);
}

SpillDevice::~SpillDevice() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(ahead_threads_);
  }
  for (std::thread& thread : threads) thread.join();
  absl::MutexLock lock(&mu_);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!chunks_[c].pinned) continue;
    for (Device* gpu : gpus_) gpu->UnregisterHostMemory(target()->HostView(c * options_.chunk));
  }
}

uint64_t SpillDevice::ChunkLength(size_t chunk) const {
  return std::min(options_.chunk, arena_size() - chunk * options_.chunk);
}

absl::Status SpillDevice::Pin(size_t c) {
  Chunk& chunk = chunks_[c];
  mu_.Await(absl::Condition(
      +[](Chunk* waited) { return !waited->busy; }, &chunk));
  if (chunk.pinned) return absl::OkStatus();
  chunk.busy = true;
  const uint64_t start = c * options_.chunk;
  const uint64_t length = ChunkLength(c);
  mu_.Unlock();
  const absl::Time begun = absl::Now();
  // A host granule is a huge page where the kernel has them (HostDevice),
  // so slices of whole granules fault in whole huge pages.
  absl::Status status = pool_.Commit(target(), start, length, target()->granule_size());
  const absl::Time committed = absl::Now();
  if (status.ok()) {
    for (Device* gpu : gpus_) gpu->RegisterHostMemory(target()->HostView(start), length);
  }
  const absl::Time registered = absl::Now();
  mu_.Lock();
  chunk.busy = false;
  if (!status.ok()) return status;
  chunk.pinned = true;
  pinned_ += length;
  costs_.bytes += length;
  ++costs_.chunks;
  costs_.commit += committed - begun;
  costs_.register_memory += registered - committed;
  return absl::OkStatus();
}

void SpillDevice::Release(size_t c) {
  Chunk& chunk = chunks_[c];
  chunk.busy = true;
  chunk.pinned = false;
  const uint64_t start = c * options_.chunk;
  const uint64_t length = ChunkLength(c);
  pinned_ -= length;
  mu_.Unlock();
  for (Device* gpu : gpus_) gpu->UnregisterHostMemory(target()->HostView(start));
  // Nothing to do when it fails: the range stays reserved and is committed
  // again before use.
  target()->Decommit(start, length).IgnoreError();
  mu_.Lock();
  chunk.busy = false;
}

uint64_t SpillDevice::ReadyBytes() const { return pinned_ - committed_ - ahead_pinned_; }

void SpillDevice::ReleaseSurplus() {
  for (size_t c = chunks_.size(); c-- > 0;) {
    const Chunk& chunk = chunks_[c];
    if (!chunk.pinned || chunk.busy || chunk.ahead || chunk.committed > 0) continue;
    if (ReadyBytes() < ready_target_ + ChunkLength(c)) break;
    Release(c);
  }
}

void SpillDevice::EndAhead(size_t c) {
  Chunk& chunk = chunks_[c];
  if (!chunk.ahead) return;
  chunk.ahead = false;
  --ahead_;
  if (chunk.pinned) ahead_pinned_ -= ChunkLength(c);
}

std::optional<size_t> SpillDevice::NextToPinAhead() const {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!chunks_[c].pinned && !chunks_[c].busy) return c;
  }
  return std::nullopt;
}

void SpillDevice::PinAhead() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (ahead_wanted_ && ahead_ < options_.ahead_chunks) {
      const std::optional<size_t> c = NextToPinAhead();
      if (!c) {
        ahead_wanted_ = false;  // every chunk is pinned: until more data
        continue;
      }
      chunks_[*c].ahead = true;
      ++ahead_;
      const absl::Status pinned = Pin(*c);
      if (!pinned.ok()) {
        // The host refused: the moves' own commits will meet it too, and
        // say so. Nothing more ahead until more data arrives.
        EndAhead(*c);
        ahead_wanted_ = false;
      } else if (chunks_[*c].ahead) {
        ahead_pinned_ += ChunkLength(*c);
        ++costs_.ahead;
      } else {
        ++costs_.ahead;
        ReleaseSurplus();  // let go idle while it was being pinned
      }
      continue;
    }
    const auto more = +[](SpillDevice* spill) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return spill->stopping_ ||
             (spill->ahead_wanted_ && spill->ahead_ < spill->options_.ahead_chunks);
    };
    if (ahead_ == 0 && costs_.chunks == 0 && costs_.waited == absl::ZeroDuration()) {
      mu_.Await(absl::Condition(more, this));
      continue;
    }
    const absl::Time idle_at = last_arrival_ + options_.ahead_idle;
    if (mu_.AwaitWithDeadline(absl::Condition(more, this), idle_at) ||
        absl::Now() < last_arrival_ + options_.ahead_idle) {
      continue;
    }
    // No data for a while: what was pinned ahead is ready memory now, of
    // which the surplus over the target goes.
    for (size_t c = 0; c < chunks_.size(); ++c) EndAhead(c);
    ahead_wanted_ = false;
    ReleaseSurplus();
    ReportCosts();
  }
}

void SpillDevice::ReportCosts() {
  if (costs_.chunks > 0 || costs_.waited > absl::ZeroDuration()) {
    LogInfo(absl::StrFormat(
        "spill: pinned %d MiB in %d chunks (%d ahead of the data): commit %d ms and register "
        "%d ms, summed over threads; commits waited %d ms for their chunks",
        costs_.bytes >> 20, costs_.chunks, costs_.ahead, absl::ToInt64Milliseconds(costs_.commit),
        absl::ToInt64Milliseconds(costs_.register_memory),
        absl::ToInt64Milliseconds(costs_.waited)));
  }
  costs_ = PinCosts();
}

void SpillDevice::Uncount(uint64_t offset, uint64_t length) {
  for (uint64_t done = 0; done < length;) {
    const size_t c = (offset + done) / options_.chunk;
    const uint64_t n = std::min(length - done, (c + 1) * options_.chunk - (offset + done));
    chunks_[c].committed -= std::min(chunks_[c].committed, n);
    committed_ -= std::min(committed_, n);
    done += n;
  }
}

absl::Status SpillDevice::Commit(uint64_t offset, uint64_t length) {
  if (offset > arena_size() || length > arena_size() - offset) {
    return target()->Commit(offset, length);  // the host device's range error
  }
  absl::MutexLock lock(&mu_);
  if (options_.ahead_chunks > 0) {
    while (ahead_threads_.size() < kAheadThreads) {
      ahead_threads_.emplace_back([this] { PinAhead(); });
    }
    ahead_wanted_ = true;
    last_arrival_ = absl::Now();
  }
  uint64_t done = 0;
  while (done < length) {
    const size_t c = (offset + done) / options_.chunk;
    const uint64_t in_chunk = std::min(length - done, (c + 1) * options_.chunk - (offset + done));
    absl::Status s;
    if (!chunks_[c].pinned || chunks_[c].busy) {
      const absl::Time asked = absl::Now();
      s = Pin(c);
      costs_.waited += absl::Now() - asked;
    }
    if (!s.ok()) {
      Uncount(offset, done);  // nothing of the range stays committed
      ReleaseSurplus();
      return s;
    }
    EndAhead(c);
    chunks_[c].committed += in_chunk;
    committed_ += in_chunk;
    done += in_chunk;
  }
  return absl::OkStatus();
}

absl::Status SpillDevice::Decommit(uint64_t offset, uint64_t length) {
  if (offset > arena_size() || length > arena_size() - offset) {
    return target()->Decommit(offset, length);
  }
  absl::MutexLock lock(&mu_);
  // The pages stay: the GPUs hold them pinned, and a DMA must never meet a
  // page the kernel swapped for another. They are released with the chunk.
  Uncount(offset, length);
  ReleaseSurplus();
  return absl::OkStatus();
}

bool SpillDevice::KeepReady(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ready_target_ = bytes;
  ReleaseSurplus();
  // The lowest chunks not pinned (any would do: a move asks IsReady where
  // to go).
  int pinned = 0;
  for (size_t c = 0; c < chunks_.size() && pinned < kReadyChunks; ++c) {
    if (ReadyBytes() >= bytes) return false;
    if (chunks_[c].pinned || chunks_[c].busy) continue;
    if (!Pin(c).ok()) return false;
    ++pinned;
  }
  return ReadyBytes() < bytes && pinned > 0;
}

bool SpillDevice::IsReady(uint64_t offset, uint64_t length) const {
  if (length == 0 || offset > arena_size() || length > arena_size() - offset) return false;
  absl::MutexLock lock(&mu_);
  for (size_t c = offset / options_.chunk; c <= (offset + length - 1) / options_.chunk; ++c) {
    if (!chunks_[c].pinned) return false;
  }
  return true;
}

uint64_t SpillDevice::ready_bytes() const {
  absl::MutexLock lock(&mu_);
  return pinned_ - committed_;
}

uint64_t SpillDevice::committed_bytes() const {
  absl::MutexLock lock(&mu_);
  return committed_;
}

int SpillDevice::ahead_chunks() const {
  absl::MutexLock lock(&mu_);
  return ahead_;
}

}  // namespace cudafs
