#include "fs/share/share_mapping.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "fs/share/share_replies.h"

namespace cudafs {
namespace {

constexpr uint32_t kMagic = ShareMagic(kShareVersion);

uint32_t KindOf(ExportedMemory::Kind kind) {
  return kind == ExportedMemory::Kind::kCuda ? kShareCuda : kShareHost;
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

}  // namespace

absl::StatusOr<ShareOutcome> CopyPlanOutcome(InodeNumber ino, const Filesystem::CopyPlan& plan) {
  if (plan.pieces.empty() || plan.pieces.size() > kShareBatch) {
    return PosixError(EOPNOTSUPP,
                      "the file lies in too many pieces for a copy: map it writable, or read it");
  }
  ShareReply reply = MakeShareReply(kMagic, 0, "");
  reply.flags = kReplyProvideMemory;
  reply.kind = KindOf(plan.pieces.front().kind);
  reply.size = plan.size;
  reply.pieces = static_cast<uint32_t>(plan.pieces.size());
  // The pieces' lengths and GPUs follow, as a shared mapping's do, with
  // no descriptors: the client brings those.
  SharePieces sizes = {};
  sizes.magic = kMagic;
  sizes.count = reply.pieces;
  ShareOutcome outcome;
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    const Exporter::CopyPiece& piece = plan.pieces[i];
    if (reply.kind == kShareCuda) {
      const std::optional<uint8_t> gpu = GpuIndex(reply, piece.pci_bus_id);
      if (!gpu) return PosixError(EOPNOTSUPP, "the file lies on more GPUs than a copy names");
      sizes.piece_gpu[i] = *gpu;
    }
    sizes.piece_size[i] = piece.bytes;
    reply.memory_bytes += piece.bytes;
    outcome.piece_bytes.push_back(piece.bytes);
  }
  outcome.messages.push_back(MessageOf(reply));
  outcome.messages.push_back(MessageOf(sizes));
  outcome.next = ShareNext::kFill;
  outcome.ino = ino;
  outcome.kind = static_cast<ShareMemoryKind>(reply.kind);
  return outcome;
}

absl::StatusOr<ShareOutcome> SharedMappingOutcome(std::unique_ptr<ExportedMemory> exported) {
  const absl::Span<const ExportedPiece> pieces = exported->pieces();
  ShareReply reply = MakeShareReply(kMagic, 0, "");
  reply.kind = KindOf(exported->kind());
  // Each GPU once, in the order its pieces first come.
  std::vector<uint8_t> gpu_of(pieces.size(), 0);
  for (size_t i = 0; i < pieces.size() && reply.kind == kShareCuda; ++i) {
    const std::optional<uint8_t> gpu = GpuIndex(reply, pieces[i].pci_bus_id);
    if (!gpu) return PosixError(EOPNOTSUPP, "the file lies on more GPUs than a mapping names");
    gpu_of[i] = *gpu;
  }
  reply.size = exported->size();
  reply.pieces = static_cast<uint32_t>(pieces.size());
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
  outcome.held = std::move(exported);
  outcome.next = ShareNext::kImported;
  return outcome;
}

}  // namespace cudafs
