// PinAhead: while it lives, threads pin host memory for a move into host
// memory ahead of the move (Device::KeepSpillReady), so that the move's
// copies find memory already pinned and run at link speed instead of
// waiting for the host to commit each chunk on the moving thread. Pinning
// needs the host's cores, not the link, so several threads pin while one
// copies (docs/DESIGN.md, "Giving memory back").
//
// On destruction the threads stop, and host memory pinned ahead beyond
// `after` is released at once.
#ifndef CUDAFS_FS_ROOM_PIN_AHEAD_H_
#define CUDAFS_FS_ROOM_PIN_AHEAD_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "alloc/devices/device.h"

namespace cudafs {

class PinAhead {
 public:
  // Keeps `bytes` ready on `threads` threads (none when either is 0);
  // `after` is the amount kept ready once it ends. `device` must outlive
  // this.
  PinAhead(Device* device, uint64_t bytes, int threads, uint64_t after);
  ~PinAhead();

  PinAhead(const PinAhead&) = delete;
  PinAhead& operator=(const PinAhead&) = delete;

 private:
  Device* const device_;
  const uint64_t after_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_ROOM_PIN_AHEAD_H_
