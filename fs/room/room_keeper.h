// RoomKeeper: gives a GPU's memory back to other programs, and takes it
// again when they are done, by moving file data between the mount's GPUs
// and its host memory (spill=, a spill part of the arena) with
// Filesystem::MoveData. Nothing is lost: a move only changes where bytes
// live.
//
//  - Round (the daemon calls it again after the delay it returns): a GPU
//    whose free memory, as its driver reports it, fell below its reserve=
//    because another program allocated gets that much back, least
//    recently used files first, into another GPU of the mount that has
//    room, else host memory. A GPU that has had room for `settle` gets
//    data back from host memory, most recently used first,
//    `return_per_round` at most a round, so that bringing it back never
//    crowds a running program's transfers. While a GPU holding data has
//    less than twice its reserve free, a little host memory is kept ready
//    (pinned ahead, Placement::KeepReady, in rounds where the
//    GPUs' data stood still), so that the first move starts at link speed
//    while the spill part pins more ahead of it; Options::ready sets
//    another amount, kept whenever the GPUs hold data.
//  - MakeRoom: moves data off every GPU until the size asked for is free on
//    each (for a job launcher, before a program that sizes itself from free
//    memory starts), and, when asked to, holds that room for `hold`:
//    nothing comes back, and new data goes to host memory first
//    (Placement::HoldBack). Without a hold, data comes back as after any
//    pressure, once a GPU has had room for `settle`.
//
// Thread-safe; a Round and a MakeRoom never run at once.
#ifndef CUDAFS_FS_ROOM_ROOM_KEEPER_H_
#define CUDAFS_FS_ROOM_ROOM_KEEPER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/storage/placement.h"
#include "fs/core/filesystem.h"

namespace cudafs {

class RoomKeeper {
 public:
  struct Options {
    // Between rounds while anything may need doing (pressure, data to
    // bring back), and while every GPU is calm (twice its reserve free).
    absl::Duration interval = absl::Milliseconds(100);
    absl::Duration calm_interval = absl::Seconds(1);
    absl::Duration settle = absl::Seconds(5);
    uint64_t return_per_round = 256 * kMiB;
    absl::Duration hold = absl::Seconds(60);
    // Host memory kept ready (pinned ahead) while the GPUs hold data, no
    // more than they hold; nullopt: while GPUs have less than twice their
    // reserve free, their reserves up to placement::kNearReady in all,
    // else none.
    std::optional<uint64_t> ready = std::nullopt;
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };
  struct Stats {
    uint64_t moved_out_bytes = 0;
    uint64_t moved_back_bytes = 0;
    uint64_t make_room_calls = 0;
  };

  // `filesystem` and `placement` (of its arena) must outlive the keeper.
  RoomKeeper(Filesystem* filesystem, Placement* placement, Options options);

  // Whether the mount has anything to keep: GPUs and host memory to move
  // their data to.
  bool active() const { return !spill_parts_.empty(); }

  // Returns how long to wait before the next round.
  absl::Duration Round();
  // Returns once `bytes` are free on each GPU of the mount holding data,
  // or only on the one whose PCI bus id is `gpu` when it is not empty
  // (nothing to do on a GPU holding nothing of ours); nullopt: once every
  // byte that can move has (files other processes map stay).
  // ResourceExhausted when host memory is full with bytes left to move,
  // or when `bytes` cannot be free because the rest is files other
  // processes map or other programs' memory. FailedPrecondition on a
  // mount without host memory to move data to. `hold`: then hold the
  // room on those GPUs for Options::hold (a hold already running is kept
  // either way).
  absl::Status MakeRoom(std::optional<uint64_t> bytes, bool hold, absl::string_view gpu = "");

  Stats stats() const;

 private:
  // Ends a hold that is over: the GPUs take new data again.
  void EndHold(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Filesystem* const filesystem_;
  Placement* const placement_;
  const Options options_;
  std::vector<size_t> gpu_parts_;
  std::vector<size_t> spill_parts_;

  mutable absl::Mutex mu_;
  // By part: since when a GPU has had room (InfinitePast: not now).
  std::vector<absl::Time> room_since_ ABSL_GUARDED_BY(mu_);
  // By part: when to ask a GPU with plenty free again.
  std::vector<absl::Time> next_look_ ABSL_GUARDED_BY(mu_);
  absl::Time hold_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool holding_ ABSL_GUARDED_BY(mu_) = false;  // GPU parts held back
  // By part: its GPU's memory when it was last looked at (nullopt without
  // a context: nothing of ours is there).
  std::vector<std::optional<Device::GpuMemory>> seen_ ABSL_GUARDED_BY(mu_);
  // The bytes on the GPUs at the last round, and the host memory asked to
  // be kept ready then.
  uint64_t last_on_gpus_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ready_target_ ABSL_GUARDED_BY(mu_) = 0;

  // Apart from mu_, which a move holds for seconds, so that --stats
  // answers while one runs. Taken after mu_.
  mutable absl::Mutex stats_mu_ ABSL_ACQUIRED_AFTER(mu_);
  Stats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_FS_ROOM_ROOM_KEEPER_H_
