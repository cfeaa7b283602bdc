// The daemon's control plane: the control attributes of a cudafs mount's
// root directory, and who may make room on its GPUs.
//
//   user.cudafs.stats   the mount's counters as "name value" lines (cudafs
//                       --stats reads it); read-only
//   user.cudafs.socket  the share service's address (fs/share), "@NAME";
//                       read-only
//   user.cudafs.faults  with fault injection on (CUDAFS_FAULT_INJECTION=1, a
//                       testing aid), root sets the device's fault plan by
//                       setting it to ParseFaultPlan's text ("off" stops it);
//                       the stats then count the faults injected. Otherwise
//                       it does not exist (no user.cudafs. name is stored,
//                       fs/core/filesystem.h).
//
// Making room (RoomMaker) comes over the share socket (cudafs_make_room:
// the CLI, Python, and GPU programs whose allocation failed), never on a
// FUSE request: it takes seconds. The owner and root may ask for anything
// and hold the room; any other user only for a byte count, with no hold:
// what a program whose GPU allocation failed needs.
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
#include "fs/fuse/control_attributes.h"
#include "fs/fuse/fuse_context.h"
#include "fs/room/room_keeper.h"
#include "fs/share/room_maker.h"
#include "fs/share/share_server.h"

namespace cudafs {

inline constexpr char kStatsAttribute[] = "user.cudafs.stats";
inline constexpr char kFaultsAttribute[] = "user.cudafs.faults";
// The daemon's pid, which cudafs --upgrade asks to hand the mount over.
inline constexpr char kDaemonAttribute[] = "user.cudafs.daemon";
inline constexpr const char* kSocketAttribute = kShareSocketAttribute;

class ControlPlane final : public ControlAttributes, public RoomMaker {
 public:
  // The stats come from `context` (the glue's counters, its device and
  // filesystem) and `arena` (the device memory held); `owner` mounted (the
  // daemon's uid); `faults` is null without fault injection; `keeper`
  // makes room, and `why_no_room` says why it cannot when it has nowhere
  // to move data (MountPlan::WhyNoRoom). All must outlive the plane.
  ControlPlane(const FuseContext* context, const Arena* arena, uid_t owner, FaultyDevice* faults,
               RoomKeeper* keeper, std::string why_no_room)
      : context_(context),
        arena_(arena),
        owner_(owner),
        faults_(faults),
        keeper_(keeper),
        why_no_room_(std::move(why_no_room)) {}

  std::optional<absl::StatusOr<std::string>> Get(absl::string_view name, uid_t caller) override;
  std::optional<absl::Status> Set(absl::string_view name, absl::string_view value,
                                  uid_t caller) override;
  std::optional<absl::Status> Remove(absl::string_view name) override;

  // EPERM for what `caller` may not ask; EOPNOTSUPP where the mount
  // cannot make room; ENOSPC where no more data can move.
  absl::Status MakeRoom(const Request& request, uid_t caller) override;

  // The share service, once it listens (before the session serves
  // requests); it must outlive the plane's use.
  void set_sharing(const ShareServer* sharing) { sharing_ = sharing; }

 private:
  const FuseContext* const context_;
  const Arena* const arena_;
  const uid_t owner_;
  FaultyDevice* const faults_;
  RoomKeeper* const keeper_;
  const std::string why_no_room_;
  const ShareServer* sharing_ = nullptr;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_CONTROL_PLANE_H_
