#include "fs/daemon/control_plane.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/spill_readiness.h"

namespace cudafs {

std::optional<absl::StatusOr<std::string>> ControlPlane::Get(absl::string_view name,
                                                             uid_t caller) {
  // Anyone who may read the root's attributes may know where to ask; the
  // service checks each request.
  if (name == kSocketAttribute && sharing_ != nullptr) return sharing_->address();
  if (name == kDaemonAttribute) return absl::StrCat(getpid());
  if (name != kStatsAttribute) return std::nullopt;
  // The counters follow everyone's activity on the mount (a side channel
  // on other users' I/O): for root and the user who mounted it only.
  if (caller != 0 && caller != owner_) return PosixError(EACCES, "the stats are the owner's");
  const FuseStats& fuse = context_->stats;
  const ArenaStats arena = arena_->Stats();
  std::string stats = absl::StrCat("device ", context_->device->Describe(),
                                   "\ndevice_bytes ", arena.committed_bytes,
                                   "\ntransport ", fuse.transport.load(),
                                   "\nmax_request ", context_->settings.max_request,
                                   "\nuring_buffer_bytes ", fuse.uring_buffer_bytes.load(),
                                   "\nrequest_buffer_bytes ", fuse.request_buffer_bytes.load(),
                                   "\n", context_->filesystem->CacheStats().ToText());
  // Each GPU of a pool: what it is, the memory it holds, the bytes of
  // files on it.
  if (arena.parts.size() > 1) {
    const std::vector<DevicePart> parts = context_->device->parts();
    for (size_t i = 0; i < arena.parts.size(); ++i) {
      absl::StrAppend(&stats, "device", i, " ", parts[i].description, "\ndevice", i, "_place ",
                      parts[i].place, "\ndevice", i, "_bytes ",
                      arena.parts[i].committed_bytes, "\ndevice", i, "_used_bytes ",
                      arena.parts[i].used, "\n");
    }
  }
  if (keeper_->active()) {
    const RoomKeeper::Stats room = keeper_->stats();
    const SpillReadiness* ready = context_->device->spill_readiness();
    absl::StrAppend(&stats, "moved_out_bytes ", room.moved_out_bytes, "\nmoved_back_bytes ",
                    room.moved_back_bytes, "\nmake_room_calls ", room.make_room_calls,
                    "\nspill_ready_bytes ", (ready != nullptr ? ready->ready_bytes() : 0), "\n");
  }
  if (faults_ != nullptr) absl::StrAppend(&stats, "faults_injected ", faults_->injected(), "\n");
  if (sharing_ != nullptr) {
    const ShareServer::Stats server = sharing_->stats();
    const ShareHandler::Stats& shared = server.requests;
    absl::StrAppend(&stats, "share_requests ", shared.requests, "\nshare_refused ",
                    shared.refused, "\nshare_copies ", shared.copies, "\nshare_copied_bytes ",
                    shared.copied_bytes, "\nshare_mappings ", shared.shared,
                    "\nshare_mapped_bytes ", shared.shared_bytes, "\nshare_syncs ", shared.syncs,
                    "\nshare_rooms ", shared.rooms,
                    "\nshare_closed ", server.closed, "\nshare_closing ", server.closing, "\n");
  }
  // This very request is among those counted.
  absl::StrAppend(&stats, fuse.requests.ToText());
  return stats;
}

std::optional<absl::Status> ControlPlane::Set(absl::string_view name, absl::string_view value,
                                              uid_t caller) {
  // Read-only, like a file in /proc.
  if (name == kStatsAttribute || name == kSocketAttribute || name == kDaemonAttribute) {
    return PosixError(EPERM, "the control attributes are read-only");
  }
  if (faults_ == nullptr || name != kFaultsAttribute) return std::nullopt;
  if (caller != 0) return PosixError(EPERM, "only root sets the fault plan");
  absl::StatusOr<FaultPlan> plan = ParseFaultPlan(value);
  if (!plan.ok()) {
    LogError(absl::StrCat(kFaultsAttribute, ": ", plan.status().message()));
    return PosixError(EINVAL, plan.status().message());
  }
  faults_->SetPlan(*plan);
  LogInfo(absl::StrCat("fault injection: ", value));
  return absl::OkStatus();
}

absl::Status ControlPlane::MakeRoom(const Request& request, uid_t caller) {
  // Moving everything and holding the room are the owner's and root's.
  // Anyone else may ask for a byte count, which moves data but holds
  // nothing: GPU programs come first, and data comes back once a GPU has
  // had room for the keeper's settle time, so a user asking again and
  // again moves others' data no more often than a program allocating and
  // freeing would. A request whose room is already free moves nothing.
  const bool trusted = caller == 0 || caller == owner_;
  if (!trusted && (!request.bytes || request.hold)) {
    return PosixError(EPERM,
                      "only the user who mounted it, or root, can make room for all or hold "
                      "it; other users may ask for a size");
  }
  const absl::Status status = keeper_->MakeRoom(request.bytes, request.hold, request.gpu);
  if (status.ok()) return status;
  const std::string asked = absl::StrCat(
      request.bytes ? absl::StrCat(*request.bytes, " bytes") : "all",
      request.gpu.empty() ? "" : absl::StrCat(" on ", request.gpu), " for uid ", caller);
  if (absl::IsFailedPrecondition(status)) {
    LogInfo(absl::StrCat("make room (", asked, "): ", why_no_room_));
    return PosixError(EOPNOTSUPP, why_no_room_);
  }
  LogError(absl::StrCat("make room (", asked, "): ", status.message()));
  if (absl::IsResourceExhausted(status)) return PosixError(ENOSPC, status.message());
  return status;
}

std::optional<absl::Status> ControlPlane::Remove(absl::string_view name) {
  if (name == kStatsAttribute || name == kSocketAttribute || name == kDaemonAttribute) {
    return PosixError(EPERM, "the control attributes are read-only");
  }
  return std::nullopt;
}

}  // namespace cudafs
