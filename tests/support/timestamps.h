// Timestamps as the tests compare them: nanoseconds since the epoch, the
// wall clock now, and a sleep long enough for the kernel's clock to move.
#ifndef CUDAFS_TESTS_SUPPORT_TIMESTAMPS_H_
#define CUDAFS_TESTS_SUPPORT_TIMESTAMPS_H_

#include <time.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace cudafs_test {

inline int64_t Nanos(const timespec& ts) { return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec; }

inline timespec WallClock() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

// Timestamps come from the kernel's coarse clock (one tick is up to 10 ms);
// sleeping past a tick makes "later" observable.
inline void SleepPastClockTick() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_TIMESTAMPS_H_
