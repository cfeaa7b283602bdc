#include "alloc/devices/spill_device.h"

#include <algorithm>
#include <utility>

namespace cudafs {

SpillDevice::SpillDevice(std::unique_ptr<Device> host, std::vector<Device*> gpus, uint64_t chunk)
    : DeviceWrapper(std::move(host)), gpus_(std::move(gpus)), chunk_(chunk) {
  absl::MutexLock lock(&mu_);
  chunks_.resize((arena_size() + chunk_ - 1) / chunk_);
}

SpillDevice::~SpillDevice() {
  absl::MutexLock lock(&mu_);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!chunks_[c].pinned) continue;
    for (Device* gpu : gpus_) gpu->UnregisterHostMemory(target()->HostView(c * chunk_));
  }
}

uint64_t SpillDevice::ChunkLength(size_t chunk) const {
  return std::min(chunk_, arena_size() - chunk * chunk_);
}

absl::Status SpillDevice::Pin(size_t c) {
  Chunk& chunk = chunks_[c];
  mu_.Await(absl::Condition(
      +[](Chunk* waited) { return !waited->busy; }, &chunk));
  if (chunk.pinned) return absl::OkStatus();
  chunk.busy = true;
  const uint64_t start = c * chunk_;
  const uint64_t length = ChunkLength(c);
  mu_.Unlock();
  absl::Status status = target()->Commit(start, length);
  if (status.ok()) {
    for (Device* gpu : gpus_) gpu->RegisterHostMemory(target()->HostView(start), length);
  }
  mu_.Lock();
  chunk.busy = false;
  if (!status.ok()) return status;
  chunk.pinned = true;
  pinned_ += length;
  return absl::OkStatus();
}

void SpillDevice::Release(size_t c) {
  Chunk& chunk = chunks_[c];
  chunk.busy = true;
  chunk.pinned = false;
  const uint64_t start = c * chunk_;
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

void SpillDevice::ReleaseSurplus() {
  for (size_t c = chunks_.size(); c-- > 0;) {
    const Chunk& chunk = chunks_[c];
    if (!chunk.pinned || chunk.busy || chunk.committed > 0) continue;
    if (pinned_ - committed_ < ready_target_ + ChunkLength(c)) break;
    Release(c);
  }
}

void SpillDevice::Uncount(uint64_t offset, uint64_t length) {
  for (uint64_t done = 0; done < length;) {
    const size_t c = (offset + done) / chunk_;
    const uint64_t n = std::min(length - done, (c + 1) * chunk_ - (offset + done));
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
  uint64_t done = 0;
  while (done < length) {
    const size_t c = (offset + done) / chunk_;
    const uint64_t in_chunk = std::min(length - done, (c + 1) * chunk_ - (offset + done));
    if (absl::Status s = Pin(c); !s.ok()) {
      Uncount(offset, done);  // nothing of the range stays committed
      ReleaseSurplus();
      return s;
    }
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

bool SpillDevice::KeepSpillReady(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ready_target_ = bytes;
  ReleaseSurplus();
  // The lowest chunks not pinned (any would do: a move asks IsReady where
  // to go).
  int pinned = 0;
  for (size_t c = 0; c < chunks_.size() && pinned < kReadyChunks; ++c) {
    if (pinned_ - committed_ >= bytes) return false;
    if (chunks_[c].pinned || chunks_[c].busy) continue;
    if (!Pin(c).ok()) return false;
    ++pinned;
  }
  return pinned_ - committed_ < bytes && pinned > 0;
}

bool SpillDevice::IsReady(uint64_t offset, uint64_t length) const {
  if (length == 0 || offset > arena_size() || length > arena_size() - offset) return false;
  absl::MutexLock lock(&mu_);
  for (size_t c = offset / chunk_; c <= (offset + length - 1) / chunk_; ++c) {
    if (!chunks_[c].pinned) return false;
  }
  return true;
}

uint64_t SpillDevice::SpillReadyBytes() const {
  absl::MutexLock lock(&mu_);
  return pinned_ - committed_;
}

uint64_t SpillDevice::pinned_bytes() const {
  absl::MutexLock lock(&mu_);
  return pinned_;
}

}  // namespace cudafs
