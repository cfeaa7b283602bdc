// PhysicalPieces: CudaDevice's table of the physical allocations mapped
// into its arena, without the driver calls that make and free them.
//
// A piece is one allocation of whole granules, at most 64 of them and at
// most max_piece_bytes, with a bit per granule that says whether it is
// committed. Commit plans what the caller maps: granules a piece already
// holds are committed again for free (Decommit leaves them mapped), the
// rest come back as runs cut to the largest piece. Uncommit hands back the
// pieces left with no committed granule, taken out of the table, for the
// caller to unmap and release. A piece marked exported was handed to
// another process, whose mapping keeps it alive.
//
// Not thread-safe: CudaDevice holds it under its mutex.
#ifndef CUDAFS_ALLOC_DEVICES_PHYSICAL_PIECES_H_
#define CUDAFS_ALLOC_DEVICES_PHYSICAL_PIECES_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"

namespace cudafs {

class PhysicalPieces {
 public:
  using Handle = unsigned long long;  // CUmemGenericAllocationHandle

  struct Piece {
    uint64_t offset = 0;  // where in the arena it is mapped
    Handle handle = 0;
    uint64_t length = 0;
    // Bit i: granule i of the piece is committed.
    uint64_t committed = 0;
    // Handed to another process (ExportShared), which keeps it alive:
    // zeroed before it is released, so it keeps no bytes of the file.
    bool exported = false;
    // The allocation as a POSIX descriptor, where this process imported it
    // from another (a handed-over arena): kept, as the driver exports no
    // imported handle again, for the next hand-over; closed with the
    // piece. -1 otherwise.
    int fd = -1;
  };

  // Pieces of at most min(max_piece_bytes, 64 granules).
  PhysicalPieces(uint64_t granule, uint64_t max_piece_bytes);

  // Marks committed the granules of [offset, offset + length) that a piece
  // holds; returns the others as runs (offset, length) of at most a piece
  // each, in order, for the caller to map and Add.
  std::vector<std::pair<uint64_t, uint64_t>> Commit(uint64_t offset, uint64_t length);
  // A piece mapped at [offset, offset + length), every granule committed;
  // unless one starts there already.
  void Add(uint64_t offset, Handle handle, uint64_t length);
  // Marks the granules of [offset, offset + length) uncommitted; returns the
  // pieces left with none, taken out.
  std::vector<Piece> Uncommit(uint64_t offset, uint64_t length);
  // Takes every piece out, committed or not.
  std::vector<Piece> TakeAll();
  // Every piece, in arena order (what a successor process maps again).
  std::vector<Piece> All() const;
  // Whether `piece` could be one of a table like this one: whole granules,
  // at most 64 of them, some committed (one with none is released, never
  // kept).
  bool Fits(const Piece& piece) const;
  // A piece as another process's table held it, committed granules and
  // all; unless one starts there already.
  void Restore(const Piece& piece);

  // The piece holding the byte at `offset`, or null; valid until a change.
  const Piece* PieceOf(uint64_t offset) const;
  // Whether [offset, offset + length) is a non-empty run of whole granules
  // that no piece reaches past; with `committed`, also tiled by pieces
  // whose every granule is committed.
  bool Exclusive(uint64_t offset, uint64_t length, bool committed) const;
  // Marks exported the pieces from the one at `offset` on that start in
  // [offset, offset + length); returns them. REQUIRES: Exclusive(offset,
  // length, /*committed=*/true).
  std::vector<Piece> MarkExported(uint64_t offset, uint64_t length);

  bool empty() const { return pieces_.empty(); }
  size_t size() const { return pieces_.size(); }
  uint64_t bytes() const;  // the pieces' lengths, committed granules or not

 private:
  static uint64_t LengthOf(const Piece& piece) { return piece.length; }
  // The bits of a piece of `length` bytes with every granule committed.
  uint64_t AllGranules(uint64_t length) const;

  const uint64_t granule_;
  const uint64_t max_piece_;
  // Arena offset of each piece -> the piece.
  absl::btree_map<uint64_t, Piece> pieces_;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_PHYSICAL_PIECES_H_
