#include "alloc/devices/physical_pieces.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "alloc/devices/containing.h"

namespace cudafs {

PhysicalPieces::PhysicalPieces(uint64_t granule, uint64_t max_piece_bytes)
    : granule_(granule), max_piece_(std::min<uint64_t>(max_piece_bytes, 64 * granule)) {}

uint64_t PhysicalPieces::AllGranules(uint64_t length) const {
  const uint64_t granules = length / granule_;
  return granules >= 64 ? ~uint64_t{0} : (uint64_t{1} << granules) - 1;
}

std::vector<std::pair<uint64_t, uint64_t>> PhysicalPieces::Commit(uint64_t offset,
                                                                  uint64_t length) {
  std::vector<std::pair<uint64_t, uint64_t>> to_map;
  for (uint64_t at = offset; at < offset + length; at += granule_) {
    if (auto it = Containing(pieces_, at, LengthOf); it != pieces_.end()) {
      // Still mapped since its last Decommit: committed again for free.
      it->second.committed |= uint64_t{1} << ((at - it->first) / granule_);
    } else if (!to_map.empty() && to_map.back().first + to_map.back().second == at &&
               to_map.back().second < max_piece_) {
      to_map.back().second += granule_;
    } else {
      to_map.emplace_back(at, granule_);
    }
  }
  return to_map;
}

void PhysicalPieces::Add(uint64_t offset, Handle handle, uint64_t length) {
  pieces_.emplace(offset, Piece{offset, handle, length, AllGranules(length)});
}

std::vector<PhysicalPieces::Piece> PhysicalPieces::Uncommit(uint64_t offset, uint64_t length) {
  std::vector<Piece> emptied;
  for (uint64_t at = offset; at < offset + length; at += granule_) {
    auto it = Containing(pieces_, at, LengthOf);
    if (it == pieces_.end()) continue;
    it->second.committed &= ~(uint64_t{1} << ((at - it->first) / granule_));
    if (it->second.committed != 0) continue;
    emptied.push_back(it->second);
    pieces_.erase(it);
  }
  return emptied;
}

std::vector<PhysicalPieces::Piece> PhysicalPieces::TakeAll() {
  std::vector<Piece> all = All();
  pieces_.clear();
  return all;
}

std::vector<PhysicalPieces::Piece> PhysicalPieces::All() const {
  std::vector<Piece> all;
  all.reserve(pieces_.size());
  for (const auto& [offset, piece] : pieces_) all.push_back(piece);
  return all;
}

bool PhysicalPieces::Fits(const Piece& piece) const {
  return piece.length > 0 && piece.offset % granule_ == 0 && piece.length % granule_ == 0 &&
         piece.length / granule_ <= 64 && (piece.committed & AllGranules(piece.length)) != 0;
}

void PhysicalPieces::Restore(const Piece& piece) {
  Piece restored = piece;
  restored.committed &= AllGranules(piece.length);
  pieces_.emplace(piece.offset, restored);
}

const PhysicalPieces::Piece* PhysicalPieces::PieceOf(uint64_t offset) const {
  auto it = Containing(pieces_, offset, LengthOf);
  return it == pieces_.end() ? nullptr : &it->second;
}

bool PhysicalPieces::Exclusive(uint64_t offset, uint64_t length, bool committed) const {
  if (length == 0 || offset % granule_ != 0 || length % granule_ != 0) return false;
  // Every piece there lies inside the range; `committed`: they tile it,
  // every granule committed.
  const uint64_t end = offset + length;
  uint64_t tiled = offset;
  auto it = pieces_.upper_bound(offset);
  if (it != pieces_.begin()) --it;
  for (; it != pieces_.end() && it->first < end; ++it) {
    const Piece& piece = it->second;
    if (it->first + piece.length <= offset) continue;
    if (it->first < offset || it->first + piece.length > end) return false;
    if (it->first == tiled && piece.committed == AllGranules(piece.length)) tiled += piece.length;
  }
  return !committed || tiled == end;
}

std::vector<PhysicalPieces::Piece> PhysicalPieces::MarkExported(uint64_t offset, uint64_t length) {
  std::vector<Piece> marked;
  for (auto it = pieces_.find(offset); it != pieces_.end() && it->first < offset + length; ++it) {
    it->second.exported = true;
    marked.push_back(it->second);
  }
  return marked;
}

uint64_t PhysicalPieces::bytes() const {
  uint64_t bytes = 0;
  for (const auto& [offset, piece] : pieces_) bytes += piece.length;
  return bytes;
}

}  // namespace cudafs
