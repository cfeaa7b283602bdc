#include "fs/daemon/background_tasks.h"

#include <functional>

#include "alloc/devices/device.h"

namespace cudafs {

BackgroundTasks::BackgroundTasks(Filesystem& filesystem, Arena& arena, bool trim_growth_when_idle,
                                 RoomKeeper& keeper) {
  // Other programs' allocations are seen only by asking: no event says so.
  if (keeper.active()) {
    keeping_.emplace(RoomKeeper::Options{}.interval,
                     std::function<absl::Duration()>([&keeper] { return keeper.Round(); }),
                     "room-keeper");
  }
  // Deletes free blocks, not granules: the files left behind keep theirs
  // committed until compaction gathers them, and the last granule emptied
  // lingers until the next look.
  compactor_.emplace(kCompactionInterval, [&filesystem, &arena] {
    // Devices wait for their copies asleep here, leaving cores to requests.
    MarkBackgroundThread();
    arena.ReleaseLingering();
    filesystem.CompactData(kCompactionBudget);
  });
  // zero_message_open: no RELEASE says when a writer is done, so a file's
  // growth slack goes once it has had no write for a while.
  if (trim_growth_when_idle) {
    growth_trimmer_.emplace(kIdleGrowthTrimInterval,
                            [&filesystem] { filesystem.TrimIdleGrowth(kIdleGrowthTrimInterval); });
  }
}

}  // namespace cudafs
