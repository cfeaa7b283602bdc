#include "fs/daemon/control_plane.h"

#include <cerrno>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "alloc/base/status_macros.h"

namespace cudafs {

std::optional<absl::StatusOr<std::string>> ControlPlane::Get(absl::string_view name,
                                                             uid_t caller) {
  // Anyone who may read the root's attributes may know where to ask; the
  // service checks each request.
  if (name == kSocketAttribute && sharing_ != nullptr) return sharing_->address();
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
    for (size_t i = 0; i < arena.parts.size(); ++i) {
      absl::StrAppend(&stats, "device", i, " ", context_->device->DescribePart(i), "\ndevice", i,
                      "_place ", context_->device->PartPlace(i), "\ndevice", i, "_bytes ",
                      arena.parts[i].committed_bytes, "\ndevice", i, "_used_bytes ",
                      arena.parts[i].used, "\n");
    }
  }
  if (keeper_->active()) {
    const RoomKeeper::Stats room = keeper_->stats();
    absl::StrAppend(&stats, "moved_out_bytes ", room.moved_out_bytes, "\nmoved_back_bytes ",
                    room.moved_back_bytes, "\nmake_room_calls ", room.make_room_calls,
                    "\nspill_ready_bytes ", context_->device->SpillReadyBytes(), "\n");
  }
  if (faults_ != nullptr) absl::StrAppend(&stats, "faults_injected ", faults_->injected(), "\n");
  if (sharing_ != nullptr) {
    const ShareServer::Stats server = sharing_->stats();
    const ShareHandler::Stats& shared = server.requests;
    absl::StrAppend(&stats, "share_requests ", shared.requests, "\nshare_refused ",
                    shared.refused, "\nshare_copies ", shared.copies, "\nshare_copied_bytes ",
                    shared.copied_bytes, "\nshare_mappings ", shared.shared,
                    "\nshare_mapped_bytes ", shared.shared_bytes, "\nshare_syncs ", shared.syncs,
                    "\nshare_closed ", server.closed, "\nshare_closing ", server.closing, "\n");
  }
  // This very request is among those counted.
  absl::StrAppend(&stats, fuse.requests.ToText());
  return stats;
}

std::optional<absl::Status> ControlPlane::Set(absl::string_view name, absl::string_view value,
                                              uid_t caller) {
  // Read-only, like a file in /proc.
  if (name == kStatsAttribute || name == kSocketAttribute) {
    return PosixError(EPERM, "the control attributes are read-only");
  }
  if (name == kMakeRoomAttribute) return MakeRoom(value, caller);
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

absl::Status ControlPlane::MakeRoom(absl::string_view value, uid_t caller) {
  std::optional<uint64_t> bytes;
  if (value != "all") {
    uint64_t parsed = 0;
    if (value.empty() || !absl::c_all_of(value, absl::ascii_isdigit) ||
        !absl::SimpleAtoi(value, &parsed)) {
      return PosixError(EINVAL, absl::StrCat(kMakeRoomAttribute,
                                             " takes a byte count in decimal digits or \"all\""));
    }
    bytes = parsed;
  }
  // Who may: the daemon decides, not the root's mode (a mode=0777 root
  // lets anyone set its attributes). Moving everything and holding the
  // room are the owner's and root's; anyone else may ask for a byte
  // count (what a program whose GPU allocation failed needs), which moves
  // data but holds nothing, and only as often as guest_turns_ allows.
  const bool trusted = caller == 0 || caller == owner_;
  if (!trusted && !bytes) {
    return PosixError(EPERM, "only the user who mounted it, or root, can make room for all");
  }
  if (!trusted) CUDAFS_RETURN_IF_ERROR(guest_turns_.Begin(caller));
  absl::Status status = keeper_->MakeRoom(bytes, /*hold=*/trusted);
  if (!trusted) guest_turns_.End(caller);
  if (!status.ok()) LogError(absl::StrCat("make room for ", value, ": ", status.message()));
  if (absl::IsFailedPrecondition(status)) return PosixError(EOPNOTSUPP, status.message());
  if (absl::IsResourceExhausted(status)) return PosixError(ENOSPC, status.message());
  return status;
}

std::optional<absl::Status> ControlPlane::Remove(absl::string_view name) {
  if (name == kMakeRoomAttribute) return PosixError(ENODATA);
  if (name == kStatsAttribute || name == kSocketAttribute) {
    return PosixError(EPERM, "the control attributes are read-only");
  }
  return std::nullopt;
}

}  // namespace cudafs
