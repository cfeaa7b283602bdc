#include "fs/share/share_handler.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "fs/share/descriptor_checks.h"
#include "fs/share/share_mapping.h"
#include "fs/share/share_replies.h"

namespace cudafs {
namespace {

const char* OpName(uint32_t op) {
  switch (op) {
    case kShareMap: return "map";
    case kShareImported: return "imported";
    case kShareSync: return "sync";
    case kShareFill: return "fill";
    case kShareMakeRoom: return "make-room";
    default: return "unknown";
  }
}

// Whether `request` is well formed and one the connection may send now.
absl::Status Validate(const ShareRequest& request, ShareNext expected) {
  if (request.reserved != 0) return PosixError(EINVAL, "the request's reserved field is not 0");
  const bool fresh = expected == ShareNext::kClose;
  const bool expected_op =
      (fresh && (request.op == kShareMap || request.op == kShareSync ||
                 request.op == kShareMakeRoom)) ||
      (expected == ShareNext::kFill && request.op == kShareFill) ||
      (expected == ShareNext::kImported && request.op == kShareImported);
  if (!expected_op) {
    if (request.op < kShareMap || request.op > kShareMakeRoom) {
      return PosixError(EINVAL, absl::StrFormat("unknown request %d", request.op));
    }
    return PosixError(EPROTO, absl::StrFormat("a %s request out of turn", OpName(request.op)));
  }
  const uint32_t known_flags = request.op == kShareMap        ? kShareMapFlags
                               : request.op == kShareMakeRoom ? kShareRoomFlags
                                                              : 0;
  if (request.flags & ~known_flags) {
    return PosixError(EINVAL, absl::StrFormat("flags 0x%x are unknown to a %s request",
                                              request.flags & ~known_flags, OpName(request.op)));
  }
  if (request.op != kShareFill && request.op != kShareMakeRoom && request.memory_bytes != 0) {
    return PosixError(EINVAL, "only a fill or a make-room names bytes");
  }
  const size_t gpu_length = strnlen(request.gpu, sizeof request.gpu);
  if (gpu_length == sizeof request.gpu) return PosixError(EINVAL, "the GPU named is too long");
  if (request.op != kShareMakeRoom && gpu_length != 0) {
    return PosixError(EINVAL, "only a make-room names a GPU");
  }
  return absl::OkStatus();
}

}  // namespace

ShareOutcome ShareHandler::Serve(const ShareRequest& request, uid_t uid,
                                 absl::Span<const int> fds, ShareNext expected,
                                 const ShareOutcome& previous) {
  if (absl::Status status = Validate(request, expected); !status.ok()) return Answer(status);
  if (request.op != kShareFill && fds.size() > 1) {
    return Answer(PosixError(EINVAL, "more than one descriptor came with the request"));
  }
  if (request.op == kShareMakeRoom && !fds.empty()) {
    return Answer(PosixError(EINVAL, "a make-room request takes no descriptor"));
  }
  const int fd = fds.empty() ? -1 : fds.front();
  switch (request.op) {
    case kShareMakeRoom:
      return MakeRoom(request, uid);
    case kShareMap:
      return Map(fd, request.flags & kShareWritable);
    case kShareFill:
      return Fill(fds, request.memory_bytes, previous);
    case kShareSync:
      return Sync(fd);
    default:  // kShareImported: the connection ends, and `held` with it
      return {};
  }
}

ShareOutcome ShareHandler::Map(int fd, bool writable) {
  absl::StatusOr<InodeNumber> ino = CheckFileDescriptor(fd, writable, settings_.mount_device);
  if (!ino.ok()) return Answer(ino.status());
  return writable ? Share(*ino) : PlanCopy(*ino);
}

ShareOutcome ShareHandler::PlanCopy(InodeNumber ino) {
  absl::StatusOr<Filesystem::CopyPlan> plan = filesystem_->PlanCopy(ino);
  if (!plan.ok()) return Answer(plan.status());
  // Counted once filled.
  absl::StatusOr<ShareOutcome> outcome = CopyPlanOutcome(ino, *plan);
  return outcome.ok() ? *std::move(outcome) : Answer(outcome.status());
}

ShareOutcome ShareHandler::Share(InodeNumber ino) {
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = filesystem_->ExportShared(ino);
  if (!exported.ok()) return Answer(exported.status());
  const uint64_t size = (*exported)->size();
  absl::StatusOr<ShareOutcome> outcome = SharedMappingOutcome(*std::move(exported));
  if (!outcome.ok()) return Answer(outcome.status());
  absl::MutexLock lock(&mu_);
  ++stats_.requests;
  ++stats_.shared;
  stats_.shared_bytes += size;
  return *std::move(outcome);
}

ShareOutcome ShareHandler::Fill(absl::Span<const int> fds, uint64_t memory_bytes,
                                const ShareOutcome& planned) {
  if (fds.size() != planned.piece_bytes.size()) {
    return Answer(PosixError(EINVAL, absl::StrFormat("the copy needs %d pieces of memory, %d came",
                                                     planned.piece_bytes.size(), fds.size())));
  }
  uint64_t planned_bytes = 0;
  for (uint64_t bytes : planned.piece_bytes) planned_bytes += bytes;
  if (memory_bytes != planned_bytes) {
    return Answer(PosixError(EINVAL, absl::StrFormat("the copy needs %d bytes of memory, %d came",
                                                     planned_bytes, memory_bytes)));
  }
  std::vector<Exporter::CopyMemory> memory;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (absl::Status status = CheckMemoryDescriptor(fds[i], planned.kind, planned.piece_bytes[i]);
        !status.ok()) {
      return Answer(status);
    }
    memory.push_back({fds[i], planned.piece_bytes[i]});
  }
  absl::StatusOr<uint64_t> copied = filesystem_->FillCopy(planned.ino, memory);
  if (!copied.ok()) return Answer(copied.status());
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    ++stats_.copies;
    stats_.copied_bytes += *copied;
  }
  ShareReply reply = ShareReplyTo(absl::OkStatus());
  reply.kind = planned.kind;
  reply.size = *copied;
  ShareOutcome outcome;
  outcome.messages.push_back(MessageOf(reply));
  return outcome;
}

ShareOutcome ShareHandler::Sync(int fd) {
  // A sync vouches for writes: it needs what a writable mapping needs.
  absl::StatusOr<InodeNumber> ino = CheckFileDescriptor(fd, true, settings_.mount_device);
  absl::Status status = ino.ok() ? filesystem_->NoteMappedWrite(*ino) : ino.status();
  if (status.ok() && settings_.notifier != nullptr) settings_.notifier->DataChanged(*ino);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.syncs;
  }
  return Answer(status);
}

ShareOutcome ShareHandler::MakeRoom(const ShareRequest& request, uid_t uid) {
  if (settings_.room_maker == nullptr) {
    return Answer(PosixError(EOPNOTSUPP, "this cudafs daemon makes no room"));
  }
  const bool all = request.flags & kShareRoomAll;
  if (all && request.memory_bytes != 0) {
    return Answer(PosixError(EINVAL, "a make-room request for all names no bytes"));
  }
  RoomMaker::Request room;
  if (!all) room.bytes = request.memory_bytes;
  room.gpu = request.gpu;  // NUL-terminated: Validate checked
  room.hold = request.flags & kShareRoomHold;
  const absl::Status status = settings_.room_maker->MakeRoom(room, uid);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.rooms;
  }
  return Answer(status);
}

ShareOutcome ShareHandler::Answer(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    if (!status.ok()) ++stats_.refused;
  }
  ShareOutcome outcome;
  outcome.messages.push_back(MessageOf(ShareReplyTo(status)));
  return outcome;
}

void ShareHandler::CountRefused() {
  absl::MutexLock lock(&mu_);
  ++stats_.requests;
  ++stats_.refused;
}

ShareHandler::Stats ShareHandler::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace cudafs
