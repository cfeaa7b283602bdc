// ExtentMap: the bytes of one regular file, as arena blocks keyed by file
// offset. A block of size S (a power of two) starts at a file offset that is
// a multiple of S. Holes read as zeros; below the end of the data (the
// furthest byte written or reserved, lowered by Truncate) every mapped byte
// is the file's or zero, so no block shows a deleted file's bytes, and past
// it mapped bytes may hold anything and read as zeros. How blocks are sized,
// zeroed, placed on GPUs and moved: docs/DESIGN.md, *Allocation*, *Sharing
// files*, *Several GPUs* and *Giving memory back*.
//
// Not thread-safe: the owning inode's lock guards it.
#ifndef CUDAFS_ALLOC_STORAGE_EXTENT_MAP_H_
#define CUDAFS_ALLOC_STORAGE_EXTENT_MAP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "alloc/devices/exporter.h"
#include "alloc/storage/arena.h"
#include "alloc/storage/compaction_plan.h"
#include "alloc/storage/extent_set.h"

namespace cudafs {

class ExtentMap {
  struct Window;  // below

 public:
  // What the maps of a mount share, each by a pointer rather than a copy.
  struct Space {
    // Extents grow up to `max_extent` (a power of two), and never stop
    // below min_block.
    Space(Arena* arena, uint64_t max_extent)
        : arena(arena), max_extent(std::max(max_extent, arena->min_block())) {}

    Arena* const arena;
    const uint64_t max_extent;
  };

  // `space` must outlive the map.
  explicit ExtentMap(const Space* space) : space_(space) {}
  ~ExtentMap();  // gives every block back to the arena

  ExtentMap(const ExtentMap&) = delete;
  ExtentMap& operator=(const ExtentMap&) = delete;

  // Copies [offset, offset + length) into `out`; unmapped bytes read as
  // zeros. The caller clamps the range to the file size.
  absl::Status Read(uint64_t offset, size_t length, char* out) const;

  // Maps whatever [offset, offset + length) lacks, then copies `data` in.
  // On ResourceExhausted nothing changed.
  absl::Status Write(uint64_t offset, const char* data, size_t length);

  // A piece of file data for WriteMapped.
  struct Run {
    uint64_t offset;  // file offset
    const char* data;
    size_t length;
  };

  // For a write-back cache: maps whatever [offset, offset + length) lacks
  // and zeroes the new blocks' bytes outside that range, but leaves the
  // bytes inside as the arena had them. The caller must write every byte of
  // the range (WriteMapped) before anything reads it from the arena; until
  // then the cache serves it. On ResourceExhausted nothing changed.
  absl::Status MapForWriteBack(uint64_t offset, uint64_t length);

  // Writes `runs`, which must lie in mapped ranges (MapForWriteBack), as one
  // device batch.
  absl::Status WriteMapped(absl::Span<const Run> runs);

  // Copies [source_offset, + length) of `source` (which may be this map, on
  // a range that does not overlap) to [offset, + length) on the device,
  // without a trip through host memory; holes copy as zeros. On
  // ResourceExhausted nothing changed.
  absl::Status CopyFrom(const ExtentMap& source, uint64_t source_offset, uint64_t offset,
                        uint64_t length);

  // Maps whatever [offset, offset + length) lacks with zeroed blocks
  // (fallocate). On ResourceExhausted nothing changed.
  absl::Status Reserve(uint64_t offset, uint64_t length);

  // Makes [offset, offset + length) read as zeros and frees every
  // min_block wholly inside it (blocks partly inside are split), but a
  // shared file's blocks of a granule or more, which are zeroed in place:
  // a mapping of them then stays the file's memory, coherent as tmpfs
  // keeps a shared mapping after a punch (they still count in
  // allocated_bytes). On a device error nothing is freed and the bytes
  // read as before.
  absl::Status PunchHole(uint64_t offset, uint64_t length);

  // Frees every min_block at or beyond `size` and zeroes the rest of the one
  // that holds byte `size`, so a later extension reads zeros.
  absl::Status Truncate(uint64_t size);

  // Gives back the part of the block holding the end of a file of `size`
  // bytes that lies past it (rounded up to min_block), by splitting the block
  // into aligned halves. Space reserved with Reserve past `size` is kept.
  void TrimTail(uint64_t size);

  // Device copies that put the bytes of the first `size` bytes of the file
  // at the same offsets of another memory (a private copy for another
  // process, Filesystem::PlanCopy): one per mapped run,
  // up to the end of the data (beyond it bytes read as zeros). Holes, and
  // what lies past the data, are left to the destination's zeros.
  std::vector<DeviceToDevice> CopiesOut(uint64_t size) const;

  // Lays the first `size` bytes (> 0) out for a shared mapping and returns
  // the device ranges that map [0, E), E >= size, back to back, in file
  // order: blocks of at least a granule whose memory backs nothing else
  // (Exporter::Exclusive). Smaller blocks and holes there move into new
  // blocks with a device copy (large files written in order already have
  // such blocks), blocks in host memory first to the other parts
  // (LeaveSpill). The file is shared from then on: a mapping holds its
  // blocks, so they are freed only whole (TrimTail keeps them, Truncate
  // zeroes what it would split off, PunchHole zeroes them in place), and
  // every mapped byte is its own or zero, past the end of the data too. On
  // ResourceExhausted nothing changed but blocks brought back from host
  // memory.
  absl::StatusOr<std::vector<DeviceRange>> Share(uint64_t size);
  bool shared() const { return shared_; }

  // The file exports itself: the memory another process maps to share the
  // first `size` bytes (> 0), laid out by Share and handed out by the
  // device's exporter (Exporter::ExportShared) in one step. Unimplemented where the
  // device cannot hand its memory out; InvalidArgument for a file under a
  // granule (whose memory would show its neighbours': such files are
  // copied).
  absl::StatusOr<std::unique_ptr<ExportedMemory>> Export(uint64_t size);
  // A private copy of the first `size` bytes (> 0) for another process:
  // the pieces of memory it goes into (Exporter::PlanCopy), and those pieces
  // filled with it (Exporter::FillCopy; FailedPrecondition when the pieces no
  // longer fit where the bytes lie). Unimplemented where the device cannot
  // fill another process's memory.
  absl::StatusOr<std::vector<Exporter::CopyPiece>> PlanCopy(uint64_t size) const;
  absl::Status CopyInto(absl::Span<const Exporter::CopyMemory> memory, uint64_t size) const;

  // Moves the bytes of blocks in parts `leave` accepts, in file order and
  // until at least `budget` bytes of blocks have moved, into blocks of the
  // same size in the first of `to` that backs one; returns the bytes
  // moved. Where `to` has no room left, the blocks placed so far move and
  // their bytes are returned; ResourceExhausted only when not one block
  // could. The blocks of a shared file never move (a mapping holds them):
  // FailedPrecondition. On a device error nothing moved.
  absl::StatusOr<uint64_t> Move(absl::FunctionRef<bool(size_t part)> leave,
                                absl::Span<const size_t> to, uint64_t budget);
  // Move in two steps, so that the file's readers (and stat) need not wait
  // for the copy: PrepareMove, with the file's lock held shared, copies
  // what Move would move into fresh blocks; FinishMove, with it held
  // exclusive, puts them in place and returns their bytes, unless the file
  // changed in between (every call that changes it counts), when nothing
  // moves and it returns 0. A PreparedMove not finished (destroyed, or
  // assigned another) gives its blocks back.
  class PreparedMove {
   public:
    PreparedMove(PreparedMove&&) = default;
    PreparedMove& operator=(PreparedMove&& other) noexcept;
    ~PreparedMove();
    uint64_t bytes() const { return bytes_; }

   private:
    friend class ExtentMap;
    PreparedMove(Arena* arena, uint16_t generation) : arena_(arena), generation_(generation) {}
    Arena* arena_;
    uint16_t generation_;
    uint64_t bytes_ = 0;
    std::vector<Window> windows_;
  };
  absl::StatusOr<PreparedMove> PrepareMove(absl::FunctionRef<bool(size_t part)> leave,
                                           absl::Span<const size_t> to, uint64_t budget) const;
  uint64_t FinishMove(PreparedMove move);
  // Moves the blocks that `plan` empties into blocks in the granules it
  // fills (Arena::AllocateForCompaction); returns the bytes moved. A block
  // for which they have no free block as large is split into aligned halves
  // (down to min_block) that move on their own. The blocks of a shared
  // file never move: FailedPrecondition. On a device error nothing moved
  // (but blocks may be split).
  absl::StatusOr<uint64_t> Compact(const CompactionPlan& plan);
  // Bytes of blocks that `plan` empties.
  uint64_t BytesIn(const CompactionPlan& plan) const;
  // Moves every block in a spill part (host memory) to the other parts,
  // the file's home first; ResourceExhausted, with nothing lost, when they
  // lack room. A file another process maps or copies needs its bytes there.
  absl::Status LeaveSpill();
  // Bytes of blocks in arena part `part`.
  uint64_t BytesIn(size_t part) const;

  // First mapped offset >= `offset`, if any (SEEK_DATA).
  std::optional<uint64_t> NextData(uint64_t offset) const;
  // First unmapped offset >= `offset` (SEEK_HOLE; may lie past the size).
  uint64_t NextHole(uint64_t offset) const;

  // Bytes of arena held (st_blocks).
  uint64_t allocated_bytes() const { return extents_.bytes(); }

  // The map as a record of a filesystem image (alloc/base/coding.h): its
  // extents and where its data ends. A shared file's mapping is another
  // process's, so no image holds one: the caller refuses those.
  void EncodeTo(std::string* out) const;
  // The part of that record a write to [offset, end) may change, laid out
  // the same (a journal's record of the write, fs/core/journal_records.h):
  // where the data ends, and only the extents the range overlaps.
  void EncodeRangeTo(uint64_t offset, uint64_t end, std::string* out) const;
  // Either record read without an arena or a check of the layout (which
  // DecodeFrom makes), and written back.
  struct Record {
    uint64_t data_end = 0;
    uint64_t reserved_end = 0;
    uint64_t home = kNoHome;
    std::vector<Extent> extents;  // in file order
  };
  static bool ParseRecord(absl::string_view* in, Record* record);
  static void PutRecord(const Record& record, std::string* out);
  // Reads such a record into this empty map, claiming its blocks in the
  // arena (Arena::Claim). InvalidArgument for a record that is none or
  // breaks the layout (the blocks it claimed are freed with the map).
  absl::Status DecodeFrom(absl::string_view* in);

  const Space& space() const { return *space_; }

 private:
  // The device's exporter, for a private copy; Unimplemented where it has
  // none.
  absl::StatusOr<Exporter*> CopyExporter() const;
  // The extent that holds byte `offset`, or end().
  ExtentSet::const_iterator Find(uint64_t offset) const;
  // A stretch of the file, [start, start + block.size), and the block
  // that holds it after a Relocate: a fresh one, or the one there now.
  struct Window {
    uint64_t start;
    Block block;
    bool fresh;
  };
  // Puts the fresh blocks of `windows` (each tiling whole extents or
  // holes) in place of what lies under them: they get the extents' bytes
  // below the end of the data and zeros elsewhere below `zero_end`, then
  // the old blocks are freed. On an error the fresh blocks are freed and
  // nothing changed.
  absl::Status Relocate(absl::Span<const Window> windows, uint64_t zero_end);
  // Relocate's two halves: the fresh blocks filled (freed on an error),
  // then put in place.
  absl::Status Fill(absl::Span<const Window> windows, uint64_t zero_end) const;
  void Install(absl::Span<const Window> windows);
  // Maps every unmapped byte of [offset, end); records the new extents in
  // `added` (file offsets) so the caller can zero or roll them back. With
  // `grow`, blocks follow the growth policy and may reach past `end`;
  // without, they cover [offset, end) rounded out to min_block and no more.
  absl::Status MapRange(uint64_t offset, uint64_t end, bool grow, std::vector<uint64_t>* added);
  // Whether writing [offset, end) extends the data (starts no later than
  // the end of the min_block holding its last byte, so it leaves no
  // unmapped hole behind, and ends past it): only such writes earn growth
  // slack (DESIGN, *Allocation*).
  bool Appends(uint64_t offset, uint64_t end) const;
  // What must be zeroed before [offset, end) is written, so that every
  // mapped byte below the data's new end is the file's or zero: the parts of
  // the blocks `added` (file offsets) by MapRange outside [offset, end), and
  // older blocks' bytes from the old end of the data to `offset`, each only
  // below the new end. Never overlapping.
  std::vector<DeviceRange> ZerosFor(const std::vector<uint64_t>& added, uint64_t offset,
                                    uint64_t end) const;
  // The device ranges of the mapped bytes of file `ranges` ([from, to)
  // pairs), merged so that none overlap (a batch's must not).
  std::vector<DeviceRange> MappedZeros(std::vector<std::pair<uint64_t, uint64_t>> ranges) const;
  // Appends the device ranges of the mapped bytes of [offset, end).
  void AppendMapped(uint64_t offset, uint64_t end, std::vector<DeviceRange>* ranges) const;
  // Appends the copies that put `data` at [offset, end), all mapped.
  void AppendCopies(uint64_t offset, uint64_t end, const char* data,
                    std::vector<HostToDevice>* copies) const;
  // Largest aligned block size for unmapped `offset` that fits between its
  // neighbours, starting from `wanted`.
  uint64_t FitBlock(uint64_t offset, uint64_t wanted) const;
  // The arena part a block of `size` bytes mapped at file offset `offset`
  // prefers: the file's home (the emptiest part when it first took memory),
  // but max_extent blocks round the GPUs from it by file offset.
  size_t PartFor(uint64_t offset, uint64_t size);
  void Release(ExtentSet::iterator it);
  // PunchHole's work for [offset, end); with `free_shared` (Truncate) a
  // shared file's whole blocks inside are freed too.
  absl::Status Cut(uint64_t offset, uint64_t end, bool free_shared);
  // Puts `block`, mapped at file offset `start` and taken out of extents_,
  // back as the aligned sub-blocks (halving down to min_block) that hold
  // bytes outside [offset, end); those wholly inside go to `freed` (but a
  // shared file's large blocks without `free_shared`), and the bytes
  // inside of the sub-blocks kept, below `zero_end`, to `zeros`.
  void Carve(uint64_t start, Block block, uint64_t offset, uint64_t end, uint64_t zero_end,
             bool free_shared, std::vector<DeviceRange>* zeros, std::vector<Extent>* freed);

  Arena* arena() const { return space_->arena; }
  uint64_t max_extent() const { return space_->max_extent; }

  static constexpr uint16_t kNoHome = 0xffff;  // a part per GPU: far fewer

  const Space* const space_;
  // End of the furthest Reserve (fallocate KEEP_SIZE may reserve past the
  // size); TrimTail keeps blocks below it.
  uint64_t reserved_end_ = 0;
  // End of the furthest byte written or reserved, lowered by Truncate: where
  // appends start (Appends).
  uint64_t data_end_ = 0;
  // The small fields below sit in the tail padding of extents_, and an
  // owner's may sit in the map's (CachedFile).
  [[no_unique_address]] ExtentSet extents_;
  bool shared_ = false;
  uint16_t home_ = kNoHome;  // arena part, once the file took memory
  // Counts the calls that change the file, for FinishMove. The file cannot
  // change during PrepareMove's copy (its lock is held shared), only in the
  // moment between the two steps: 16 bits, in the set's tail padding, would
  // need 65,536 changes there to come round.
  uint16_t generation_ = 0;
};

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_STORAGE_EXTENT_MAP_H_
