#include "fs/room/pin_ahead.h"

namespace cudafs {

PinAhead::PinAhead(Device* device, uint64_t bytes, int threads, uint64_t after)
    : device_(device), after_(after) {
  if (bytes == 0) return;
  // Each call pins chunks no other thread is pinning, a few at a time, and
  // says whether more are wanted: the threads share the work with no plan.
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, bytes] {
      while (!stop_.load(std::memory_order_relaxed) && device_->KeepSpillReady(bytes)) {
      }
    });
  }
}

PinAhead::~PinAhead() {
  stop_.store(true, std::memory_order_relaxed);
  for (std::thread& thread : threads_) thread.join();
  if (!threads_.empty()) device_->KeepSpillReady(after_);
}

}  // namespace cudafs
