// BackgroundTasks: what the daemon does beside serving requests, each on a
// thread of its own while the object lives: malloc's free memory handed
// back (MemoryTrimmer), other programs' GPU allocations answered by moving
// data off the GPU (RoomKeeper::Round, after the delay each round asks
// for), the memory of granules that small files barely use given back by
// compacting them (Filesystem::CompactData) or because a moment passed
// (Arena::ReleaseLingering), and under zero_message_open
// the growth slack of files no longer written given back.
#ifndef CUDAFS_FS_DAEMON_BACKGROUND_TASKS_H_
#define CUDAFS_FS_DAEMON_BACKGROUND_TASKS_H_

#include <optional>

#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/storage/arena.h"
#include "fs/core/filesystem.h"
#include "fs/daemon/memory_trimmer.h"
#include "fs/daemon/periodic_task.h"
#include "fs/room/room_keeper.h"

namespace cudafs {

class BackgroundTasks {
 public:
  // zero_message_open: how long a file goes without a write before its
  // growth slack is given back (and how often that is looked at).
  static constexpr absl::Duration kIdleGrowthTrimInterval = absl::Seconds(1);
  // How often compaction looks, and the most it moves each time: memory
  // comes back within about a second of the deletes that left it barely
  // used, and no look holds the files' locks for long.
  static constexpr absl::Duration kCompactionInterval = absl::Seconds(1);
  static constexpr uint64_t kCompactionBudget = 64 * kMiB;

  // Starts the tasks `filesystem` asks for (FilesystemConfig's
  // trim_growth_when_idle) and, when it has anything to keep, `keeper`'s;
  // gives back the granules `arena` (the filesystem's) keeps a moment
  // (Arena::LingerEmptyGranules). All must outlive this object.
  BackgroundTasks(Filesystem& filesystem, Arena& arena, bool trim_growth_when_idle,
                  RoomKeeper& keeper);
  // Stops them, waiting for a run in progress.
  ~BackgroundTasks() = default;

  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;

 private:
  const MemoryTrimmer trimmer_;
  std::optional<PeriodicTask> keeping_;
  std::optional<PeriodicTask> compactor_;
  std::optional<PeriodicTask> growth_trimmer_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_BACKGROUND_TASKS_H_
