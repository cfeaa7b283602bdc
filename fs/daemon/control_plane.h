// The control attributes of a cudafs mount's root directory:
//
//   user.cudafs.stats   the mount's counters as "name value" lines (cudafs
//                       --stats reads it); read-only
//   user.cudafs.socket  the share service's address (fs/share), "@NAME";
//                       read-only
//   user.cudafs.make_room  setting it to a byte count or "all" returns once
//                       that much is free on each GPU of the mount
//                       (RoomKeeper::MakeRoom; cudafs --make-room sets it).
//                       The owner and root may ask for anything and hold
//                       the room; other users only for a byte count, with
//                       no hold, as often as MakeRoomTurns lets them
//                       (EPERM, EBUSY otherwise)
//   user.cudafs.faults  with fault injection on (CUDAFS_FAULT_INJECTION=1, a
//                       testing aid), root sets the device's fault plan by
//                       setting it to ParseFaultPlan's text ("off" stops it);
//                       the stats then count the faults injected. Otherwise
//                       it does not exist (no user.cudafs. name is stored,
//                       fs/core/filesystem.h).
#ifndef CUDAFS_FS_DAEMON_CONTROL_PLANE_H_
#define CUDAFS_FS_DAEMON_CONTROL_PLANE_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "alloc/devices/faulty_device.h"
#include "alloc/storage/arena.h"
#include "fs/daemon/make_room_turns.h"
#include "fs/fuse/control_attributes.h"
#include "fs/fuse/fuse_ops.h"
#include "fs/room/room_keeper.h"
#include "fs/share/share_server.h"

namespace cudafs {

inline constexpr char kStatsAttribute[] = "user.cudafs.stats";
inline constexpr char kFaultsAttribute[] = "user.cudafs.faults";
inline constexpr char kMakeRoomAttribute[] = "user.cudafs.make_room";
inline constexpr const char* kSocketAttribute = kShareSocketAttribute;

class ControlPlane final : public ControlAttributes {
 public:
  // The stats come from `context` (the glue's counters, its device and
  // filesystem) and `arena` (the device memory held); `owner` mounted (the
  // daemon's uid); `faults` is null without fault injection; `keeper`
  // makes room. All must outlive the plane.
  ControlPlane(const FuseContext* context, const Arena* arena, uid_t owner, FaultyDevice* faults,
               RoomKeeper* keeper)
      : context_(context), arena_(arena), owner_(owner), faults_(faults), keeper_(keeper) {}

  std::optional<absl::StatusOr<std::string>> Get(absl::string_view name, uid_t caller) override;
  std::optional<absl::Status> Set(absl::string_view name, absl::string_view value,
                                  uid_t caller) override;
  std::optional<absl::Status> Remove(absl::string_view name) override;

  // The share service, once it listens (before the session serves
  // requests); it must outlive the plane's use.
  void set_sharing(const ShareServer* sharing) { sharing_ = sharing; }

 private:
  // kMakeRoomAttribute set to `value` by `caller`.
  absl::Status MakeRoom(absl::string_view value, uid_t caller);

  const FuseContext* const context_;
  const Arena* const arena_;
  const uid_t owner_;
  FaultyDevice* const faults_;
  RoomKeeper* const keeper_;
  const ShareServer* sharing_ = nullptr;
  // Users other than the owner and root: one make-room request at a time
  // each, and one start every 10 s, twice the keeper's `settle` (how long
  // a GPU must have room before data comes back): a user looping on it
  // moves others' data at most once per 10 s, and lets it come back in
  // between, rather than keeping the GPUs empty.
  MakeRoomTurns guest_turns_{absl::Seconds(10)};
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_CONTROL_PLANE_H_
