// MakeRoomTurns: how often a user other than the mount's owner and root
// may have the daemon make room (ControlPlane, user.cudafs.make_room).
// Such a request moves other users' data off the GPUs, so that a loop of
// them could keep everyone's files in host memory: each uid gets one
// request at a time, and one start per `interval`. The owner and root
// are not counted here.
//
// Thread-safe.
#ifndef CUDAFS_FS_DAEMON_MAKE_ROOM_TURNS_H_
#define CUDAFS_FS_DAEMON_MAKE_ROOM_TURNS_H_

#include <sys/types.h>

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cudafs {

class MakeRoomTurns {
 public:
  explicit MakeRoomTurns(
      absl::Duration interval, std::function<absl::Time()> clock = [] { return absl::Now(); })
      : interval_(interval), clock_(std::move(clock)) {}

  // Starts a request of `uid`: OK, to be followed by End(uid); or EBUSY
  // (PosixError) while one of its requests runs, or less than `interval`
  // after its last one started, saying when it may ask again.
  absl::Status Begin(uid_t uid);
  void End(uid_t uid);

 private:
  struct Turn {
    absl::Time started;
    bool running = false;
  };

  const absl::Duration interval_;
  const std::function<absl::Time()> clock_;
  absl::Mutex mu_;
  // The uids that asked within the last interval, or still wait.
  absl::flat_hash_map<uid_t, Turn> turns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MAKE_ROOM_TURNS_H_
