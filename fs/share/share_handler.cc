#include "fs/share/share_handler.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "fs/share/descriptor_checks.h"

namespace cudafs {
namespace {

constexpr uint32_t kMagic = ShareMagic(kShareVersion);

template <typename T>
ShareMessage MessageOf(const T& value, std::vector<int> fds = {}) {
  return {std::string(reinterpret_cast<const char*>(&value), sizeof value), std::move(fds)};
}

ShareReply Reply(uint32_t magic, int error, absl::string_view why) {
  ShareReply reply = {};
  reply.magic = magic;
  reply.error = error;
  absl::SNPrintF(reply.message, sizeof reply.message, "%s", why);
  return reply;
}

// The reply to a request that failed with `status` (or succeeded, with
// nothing more to say).
ShareReply ReplyTo(const absl::Status& status) {
  if (status.ok()) return Reply(kMagic, 0, "");
  const int error = ToErrno(status);
  if (error == EIO) LogError(status.ToString());
  return Reply(kMagic, error, status.message());
}

// The index of GPU `bus_id` in the reply's table of GPUs, added there when
// new; nullopt when the table is full.
std::optional<uint8_t> GpuIndex(ShareReply& reply, const std::string& bus_id) {
  uint32_t g = 0;
  while (g < reply.gpus && bus_id != reply.pci_bus_id[g]) ++g;
  if (g == reply.gpus) {
    if (g == kShareMaxGpus) return std::nullopt;
    absl::SNPrintF(reply.pci_bus_id[g], sizeof reply.pci_bus_id[g], "%s", bus_id);
    ++reply.gpus;
  }
  return static_cast<uint8_t>(g);
}

const char* OpName(uint32_t op) {
  switch (op) {
    case kShareMap: return "map";
    case kShareImported: return "imported";
    case kShareSync: return "sync";
    case kShareFill: return "fill";
    default: return "unknown";
  }
}

// Whether `request` is well formed and one the connection may send now.
absl::Status Validate(const ShareRequest& request, ShareNext expected) {
  if (request.reserved != 0) return PosixError(EINVAL, "the request's reserved field is not 0");
  if (request.flags & ~kShareKnownRequestFlags) {
    return PosixError(EINVAL, absl::StrFormat("unknown request flags 0x%x",
                                              request.flags & ~kShareKnownRequestFlags));
  }
  const bool fresh = expected == ShareNext::kClose;
  const bool expected_op =
      (fresh && (request.op == kShareMap || request.op == kShareSync)) ||
      (expected == ShareNext::kFill && request.op == kShareFill) ||
      (expected == ShareNext::kImported && request.op == kShareImported);
  if (!expected_op) {
    if (request.op < kShareMap || request.op > kShareFill) {
      return PosixError(EINVAL, absl::StrFormat("unknown request %d", request.op));
    }
    return PosixError(EPROTO, absl::StrFormat("a %s request out of turn", OpName(request.op)));
  }
  if (request.op != kShareFill && request.memory_bytes != 0) {
    return PosixError(EINVAL, "only a fill names memory");
  }
  if (request.op != kShareMap && request.flags != 0) {
    return PosixError(EINVAL, "only a map takes flags");
  }
  return absl::OkStatus();
}

}  // namespace

bool ShareAllowed(uid_t uid, const ShareSettings& settings) {
  return settings.allow_other || uid == settings.owner || (settings.allow_root && uid == 0);
}

ShareMessage ShareRefusal(uint32_t magic, int error, absl::string_view why) {
  return MessageOf(Reply(magic, error, why));
}

std::optional<ShareMessage> RefuseOtherProtocol(uint32_t magic) {
  const uint32_t version = ShareVersionOf(magic);
  if (version == kShareVersion) return std::nullopt;
  if (version == 0) return ShareRefusal(kMagic, EPROTO, "not a cudafs share request");
  return ShareRefusal(
      magic, EPROTONOSUPPORT,
      absl::StrFormat("this cudafs daemon speaks share protocol %d, the client %d: use the "
                      "client library of the cudafs that mounted",
                      kShareVersion, version));
}

ShareOutcome ShareHandler::Serve(const ShareRequest& request, absl::Span<const int> fds,
                                 ShareNext expected, const ShareOutcome& previous) {
  if (absl::Status status = Validate(request, expected); !status.ok()) return Answer(status);
  if (request.op != kShareFill && fds.size() > 1) {
    return Answer(PosixError(EINVAL, "more than one descriptor came with the request"));
  }
  const int fd = fds.empty() ? -1 : fds.front();
  switch (request.op) {
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
  if (!writable) {
    absl::StatusOr<Filesystem::CopyPlan> plan = filesystem_->PlanCopy(*ino);
    if (!plan.ok()) return Answer(plan.status());
    if (plan->pieces.empty() || plan->pieces.size() > kShareBatch) {
      return Answer(PosixError(EOPNOTSUPP, "the file lies in too many pieces for a copy: map it "
                                           "writable, or read it"));
    }
    ShareReply reply = Reply(kMagic, 0, "");
    reply.flags = kReplyProvideMemory;
    reply.kind = plan->pieces.front().kind == ExportedMemory::Kind::kCuda ? kShareCuda : kShareHost;
    reply.size = plan->size;
    reply.pieces = static_cast<uint32_t>(plan->pieces.size());
    // The pieces' lengths and GPUs follow, as a shared mapping's do, with
    // no descriptors: the client brings those.
    SharePieces sizes = {};
    sizes.magic = kMagic;
    sizes.count = reply.pieces;
    ShareOutcome outcome;
    for (size_t i = 0; i < plan->pieces.size(); ++i) {
      const Device::CopyPiece& piece = plan->pieces[i];
      if (reply.kind == kShareCuda) {
        const std::optional<uint8_t> gpu = GpuIndex(reply, piece.pci_bus_id);
        if (!gpu) {
          return Answer(PosixError(EOPNOTSUPP, "the file lies on more GPUs than a copy names"));
        }
        sizes.piece_gpu[i] = *gpu;
      }
      sizes.piece_size[i] = piece.bytes;
      reply.memory_bytes += piece.bytes;
      outcome.piece_bytes.push_back(piece.bytes);
    }
    outcome.messages.push_back(MessageOf(reply));
    outcome.messages.push_back(MessageOf(sizes));
    outcome.next = ShareNext::kFill;
    outcome.ino = *ino;
    outcome.kind = static_cast<ShareMemoryKind>(reply.kind);
    return outcome;
  }
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported = filesystem_->ExportShared(*ino);
  if (!exported.ok()) return Answer(exported.status());
  const absl::Span<const ExportedPiece> pieces = (*exported)->pieces();
  ShareReply reply = Reply(kMagic, 0, "");
  reply.kind = (*exported)->kind() == ExportedMemory::Kind::kCuda ? kShareCuda : kShareHost;
  // Each GPU once, in the order its pieces first come.
  std::vector<uint8_t> gpu_of(pieces.size(), 0);
  for (size_t i = 0; i < pieces.size() && reply.kind == kShareCuda; ++i) {
    const std::optional<uint8_t> gpu = GpuIndex(reply, pieces[i].pci_bus_id);
    if (!gpu) {
      return Answer(PosixError(EOPNOTSUPP, "the file lies on more GPUs than a mapping names"));
    }
    gpu_of[i] = *gpu;
  }
  reply.size = (*exported)->size();
  reply.pieces = static_cast<uint32_t>(pieces.size());
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    ++stats_.shared;
    stats_.shared_bytes += reply.size;
  }
  ShareOutcome outcome;
  outcome.messages.push_back(MessageOf(reply));
  for (size_t first = 0; first < pieces.size(); first += kShareBatch) {
    SharePieces batch = {};
    batch.magic = kMagic;
    batch.count = static_cast<uint32_t>(std::min<size_t>(kShareBatch, pieces.size() - first));
    std::vector<int> fds;
    for (uint32_t i = 0; i < batch.count; ++i) {
      batch.piece_size[i] = pieces[first + i].size;
      batch.piece_gpu[i] = gpu_of[first + i];
      fds.push_back(pieces[first + i].fd);
    }
    outcome.messages.push_back(MessageOf(batch, std::move(fds)));
  }
  outcome.held = *std::move(exported);
  outcome.next = ShareNext::kImported;
  return outcome;
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
  std::vector<Device::CopyMemory> memory;
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
  ShareReply reply = Reply(kMagic, 0, "");
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

ShareOutcome ShareHandler::Answer(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    if (!status.ok()) ++stats_.refused;
  }
  ShareOutcome outcome;
  outcome.messages.push_back(MessageOf(ReplyTo(status)));
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
