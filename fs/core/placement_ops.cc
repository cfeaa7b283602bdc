// Where file data lives: the moves between the arena's parts (GPUs, host
// memory) that give a GPU's memory back, and where a file's bytes are.
#include <cerrno>
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"

namespace cudafs {

namespace {

// Bytes moved under one hold of a file's lock: its readers and writers wait
// at most this long a move (milliseconds at link speed).
constexpr uint64_t kMovePiece = 256 * kMiB;

}  // namespace

uint64_t Filesystem::MoveData(size_t from, absl::Span<const size_t> to, uint64_t bytes,
                              MoveOrder order, bool* out_of_room) {
  if (out_of_room != nullptr) *out_of_room = false;
  struct Candidate {
    uint32_t last_use;
    std::shared_ptr<Inode> inode;
  };
  std::vector<Candidate> candidates;
  for (std::shared_ptr<Inode>& inode : state_->table.All()) {
    if (!inode->is_regular()) continue;
    absl::ReaderMutexLock lock(&inode->mu);
    const CachedFile* data = inode->data();
    if (data == nullptr || data->shared() || data->BytesIn(from) == 0) continue;
    candidates.push_back({data->last_use(), std::move(inode)});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [order](const Candidate& a, const Candidate& b) {
                     return order == MoveOrder::kLeastRecentlyUsed ? a.last_use < b.last_use
                                                                   : a.last_use > b.last_use;
                   });
  const auto leave = [from](size_t part) { return part == from; };
  uint64_t moved = 0;
  for (const Candidate& candidate : candidates) {
    // A file's lock is let go between pieces, so that its readers and
    // writers go on; the file may be shared, truncated or gone meanwhile.
    for (;;) {
      if (moved >= bytes) return moved;
      absl::MutexLock lock(&candidate.inode->mu);
      CachedFile* data = candidate.inode->data();
      if (data == nullptr || data->shared()) break;
      absl::StatusOr<uint64_t> piece = data->Move(leave, to, std::min(kMovePiece, bytes - moved));
      if (!piece.ok()) {
        // No room in any of `to`: no other file will find any either.
        if (absl::IsResourceExhausted(piece.status())) {
          if (out_of_room != nullptr) *out_of_room = true;
          return moved;
        }
        break;
      }
      if (*piece == 0) break;
      moved += *piece;
    }
  }
  return moved;
}

absl::StatusOr<std::string> Filesystem::Where(InodeNumber ino) {
  absl::StatusOr<std::shared_ptr<Inode>> found = state_->Get(ino);
  if (!found.ok()) return found.status();
  Inode& inode = **found;
  if (!inode.is_regular()) return PosixError(ENODATA);
  const Device& device = state_->arena->device();
  absl::btree_map<std::string, uint64_t> places;
  {
    absl::ReaderMutexLock lock(&inode.mu);
    if (const CachedFile* data = inode.data()) {
      for (size_t part = 0; part < state_->arena->part_count(); ++part) {
        if (const uint64_t bytes = data->BytesIn(part)) places[device.PartPlace(part)] += bytes;
      }
    }
  }
  std::string text;
  for (const auto& [place, bytes] : places) absl::StrAppend(&text, place, " ", bytes, "\n");
  return text;
}

}  // namespace cudafs
