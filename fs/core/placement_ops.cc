// Where file data lives: the moves between the arena's parts (GPUs, host
// memory) that give a GPU's memory back, and where a file's bytes are.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "alloc/base/errors.h"
#include "alloc/base/status_macros.h"
#include "alloc/devices/device.h"
#include "fs/core/filesystem.h"
#include "fs/core/filesystem_state.h"
#include "fs/core/journal_scope.h"

namespace cudafs {

namespace {

// Bytes moved a piece: the file's writers wait at most this long a move
// (milliseconds at link speed).
constexpr uint64_t kMovePiece = 256 * kMiB;
// Threads moving files at once.
constexpr size_t kMoveThreads = 8;

// Moves up to `budget` bytes of `inode`'s blocks in parts `leave` accepts
// into `to`; the bytes moved, 0 when nothing could. The piece is copied
// with the file's lock held shared, so that its readers (and stat, and a
// listing of its directory) go on, and put in place with it held
// exclusive. A piece the file changed under (a write, a flush of its
// cached pages, a truncate) is moved again under the exclusive lock, as
// its writers wait: a file written all along still moves. The file may be
// shared or gone meanwhile.
absl::StatusOr<uint64_t> MovePiece(Inode& inode, absl::FunctionRef<bool(size_t part)> leave,
                                   absl::Span<const size_t> to, uint64_t budget) {
  std::optional<absl::StatusOr<ExtentMap::PreparedMove>> prepared;
  {
    absl::ReaderMutexLock lock(&inode.mu);
    const CachedFile* data = inode.data();
    if (data == nullptr || data->shared()) return 0;
    prepared.emplace(data->PrepareMove(leave, to, budget));
  }
  if (!prepared->ok()) return prepared->status();
  if ((*prepared)->bytes() == 0) return 0;
  absl::MutexLock lock(&inode.mu);
  CachedFile* data = inode.data();
  if (data == nullptr) return 0;
  const uint64_t moved = data->FinishMove(**std::move(prepared));
  if (moved > 0 || data->shared()) return moved;
  return data->Move(leave, to, budget);
}

}  // namespace

uint64_t Filesystem::MoveData(size_t from, absl::Span<const size_t> to, uint64_t bytes,
                              MoveOrder order, bool* out_of_room) {
  if (out_of_room != nullptr) *out_of_room = false;
  struct Candidate {
    uint32_t last_use;
    uint64_t bytes;  // in `from` when looked at
    std::shared_ptr<Inode> inode;
  };
  std::vector<Candidate> candidates;
  for (std::shared_ptr<Inode>& inode : state_->table.All()) {
    if (!inode->is_regular()) continue;
    absl::ReaderMutexLock lock(&inode->mu);
    const CachedFile* data = inode->data();
    if (data == nullptr || data->shared()) continue;
    if (const uint64_t in_part = data->BytesIn(from)) {
      candidates.push_back({data->last_use(), in_part, std::move(inode)});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [order](const Candidate& a, const Candidate& b) {
                     return order == MoveOrder::kLeastRecentlyUsed ? a.last_use < b.last_use
                                                                   : a.last_use > b.last_use;
                   });
  const auto leave = [from](size_t part) { return part == from; };
  // Files move on several threads: most of a move is committing host
  // memory and copying into it, which one core alone does far below the
  // link's speed (docs/DESIGN.md, *Giving memory back*). The
  // files a round moves are the first in order whose bytes make up what is
  // left to move, so threads keep the order but for files moving at once.
  std::atomic<uint64_t> moved{0};
  std::atomic<bool> full{false};
  size_t first = 0;
  while (first < candidates.size() && moved.load() < bytes && !full.load()) {
    std::vector<std::pair<const Candidate*, uint64_t>> round;  // file, budget
    for (uint64_t planned = moved.load(); first < candidates.size() && planned < bytes; ++first) {
      const uint64_t budget = std::min(candidates[first].bytes, bytes - planned);
      round.emplace_back(&candidates[first], budget);
      planned += budget;
    }
    std::atomic<size_t> next{0};
    const auto work = [&] {
      // Devices wait for their copies asleep here, leaving cores to requests.
      MarkBackgroundThread();
      for (size_t i; (i = next.fetch_add(1)) < round.size();) {
        const std::shared_ptr<Inode>& inode = round[i].first->inode;
        for (uint64_t done = 0; done < round[i].second && !full.load();) {
          JournalScope journal(*state_);
          const absl::StatusOr<uint64_t> piece =
              MovePiece(*inode, leave, to, std::min(kMovePiece, round[i].second - done));
          JournalScope::Inode(inode->ino);
          // No room in any of `to`: no other file will find any either.
          if (absl::IsResourceExhausted(piece.status())) full.store(true);
          if (!piece.ok() || *piece == 0) break;
          done += *piece;
          moved.fetch_add(*piece);
        }
      }
    };
    std::vector<std::thread> threads;
    for (size_t t = 0; t < std::min(kMoveThreads, round.size()); ++t) threads.emplace_back(work);
    for (std::thread& thread : threads) thread.join();
  }
  if (out_of_room != nullptr) *out_of_room = full.load();
  return moved.load();
}

uint64_t Filesystem::CompactData(uint64_t budget) {
  const CompactionPlan plan = state_->arena->PlanCompaction(budget);
  if (plan.empty()) return 0;
  std::vector<std::shared_ptr<Inode>> files;
  for (std::shared_ptr<Inode>& inode : state_->table.All()) {
    if (!inode->is_regular()) continue;
    absl::ReaderMutexLock lock(&inode->mu);
    const CachedFile* data = inode->data();
    if (data != nullptr && !data->shared() && data->BytesIn(plan) > 0) {
      files.push_back(std::move(inode));
    }
  }
  // One file at a time, on this thread: what moves of a file is its blocks
  // smaller than a granule in the granules to empty, so its readers and
  // writers wait for a copy of at most the plan's bytes, most often a few
  // blocks'.
  uint64_t moved = 0;
  for (const std::shared_ptr<Inode>& inode : files) {
    JournalScope journal(*state_);
    JournalScope::Inode(inode->ino);
    absl::MutexLock lock(&inode->mu);
    CachedFile* data = inode->data();
    if (data == nullptr || data->shared()) continue;
    // A device error leaves the file as it was; its blocks stay put.
    if (absl::StatusOr<uint64_t> piece = data->Compact(plan); piece.ok()) moved += *piece;
  }
  return moved;
}

absl::StatusOr<std::string> Filesystem::Where(InodeNumber ino) {
  CUDAFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> found, state_->Get(ino));
  Inode& inode = *found;
  if (!inode.is_regular()) return PosixError(ENODATA);
  const std::vector<DevicePart> parts = state_->arena->device().parts();
  absl::btree_map<std::string, uint64_t> places;
  {
    absl::ReaderMutexLock lock(&inode.mu);
    if (const CachedFile* data = inode.data()) {
      for (size_t part = 0; part < parts.size(); ++part) {
        if (const uint64_t bytes = data->BytesIn(part)) places[parts[part].place] += bytes;
      }
    }
  }
  std::string text;
  for (const auto& [place, bytes] : places) absl::StrAppend(&text, place, " ", bytes, "\n");
  return text;
}

}  // namespace cudafs
