#include "fs/daemon/make_room_turns.h"

#include <cerrno>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"

namespace cudafs {

absl::Status MakeRoomTurns::Begin(uid_t uid) {
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  // Forgotten once over, so the table holds only the uids of the last
  // interval.
  absl::erase_if(turns_, [&](const auto& entry) {
    return !entry.second.running && now - entry.second.started >= interval_;
  });
  auto [it, fresh] = turns_.try_emplace(uid);
  Turn& turn = it->second;
  if (!fresh) {
    if (turn.running) {
      return PosixError(EBUSY, "a make-room request of this user is still running");
    }
    return PosixError(
        EBUSY, absl::StrFormat("users other than the mount's owner may make room "
                               "once every %d s: again in %d s",
                               absl::ToInt64Seconds(interval_),
                               absl::ToInt64Seconds(
                                   absl::Ceil(turn.started + interval_ - now, absl::Seconds(1)))));
  }
  turn.started = now;
  turn.running = true;
  return absl::OkStatus();
}

void MakeRoomTurns::End(uid_t uid) {
  absl::MutexLock lock(&mu_);
  if (auto it = turns_.find(uid); it != turns_.end()) it->second.running = false;
}

}  // namespace cudafs
