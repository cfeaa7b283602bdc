#include "fs/daemon/memory_trimmer.h"

#include <malloc.h>

#include <algorithm>

namespace cudafs {

MemoryTrimmer::MemoryTrimmer(absl::Duration interval) {
  // Setting it also turns off glibc's dynamic raising of it.
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  thread_ = std::make_unique<PeriodicTask>(interval, [this] { TrimIfWorthIt(); });
}

bool MemoryTrimmer::TrimIfWorthIt() {
  // fordblks: bytes in free chunks of every arena (the tops included).
  const uint64_t free_bytes = mallinfo2().fordblks;
  if (free_bytes <= baseline_ + kSlackBytes) {
    baseline_ = std::min(baseline_, free_bytes);
    return false;
  }
  malloc_trim(0);
  baseline_ = mallinfo2().fordblks;
  return true;
}

}  // namespace cudafs
