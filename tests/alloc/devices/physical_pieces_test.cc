#include "alloc/devices/physical_pieces.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "alloc/base/sizes.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

using Runs = std::vector<std::pair<uint64_t, uint64_t>>;

constexpr uint64_t kGranule = 2 * kMiB;
// 16 granules, as CudaDevice's pieces of 2 MiB granules.
constexpr uint64_t kMaxPiece = 32 * kMiB;

// Plans a commit and adds what it asks for, as CudaDevice does once mapped;
// handles count up from `next_handle`.
void CommitAndAdd(PhysicalPieces& pieces, uint64_t offset, uint64_t length,
                  PhysicalPieces::Handle& next_handle) {
  for (const auto& [at, run] : pieces.Commit(offset, length)) pieces.Add(at, next_handle++, run);
}

std::vector<uint64_t> OffsetsOf(const std::vector<PhysicalPieces::Piece>& pieces) {
  std::vector<uint64_t> offsets;
  for (const PhysicalPieces::Piece& piece : pieces) offsets.push_back(piece.offset);
  return offsets;
}

TEST(PhysicalPiecesTest, StartsEmpty) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(pieces.size(), 0u);
  EXPECT_EQ(pieces.bytes(), 0u);
  EXPECT_EQ(pieces.PieceOf(0), nullptr);
  EXPECT_TRUE(pieces.Uncommit(0, 4 * kGranule).empty());
  EXPECT_TRUE(pieces.TakeAll().empty());
}

TEST(PhysicalPiecesTest, CommitOfNothingMappedAsksForRunsCutToThePieceSize) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  EXPECT_EQ(pieces.Commit(0, kGranule), (Runs{{0, kGranule}}));
  // 40 granules: 16 + 16 + 8.
  EXPECT_EQ(pieces.Commit(10 * kGranule, 40 * kGranule),
            (Runs{{10 * kGranule, kMaxPiece},
                  {26 * kGranule, kMaxPiece},
                  {42 * kGranule, 8 * kGranule}}));
  // Planning adds nothing: the caller adds what it mapped.
  EXPECT_TRUE(pieces.empty());
}

TEST(PhysicalPiecesTest, PiecesAreAtMostSixtyFourGranules) {
  // One bit per granule: a larger max_piece_bytes is cut to 64 granules.
  PhysicalPieces pieces(kGranule, 1024 * kGranule);
  EXPECT_EQ(pieces.Commit(0, 100 * kGranule),
            (Runs{{0, 64 * kGranule}, {64 * kGranule, 36 * kGranule}}));
  pieces.Add(0, 1, 64 * kGranule);
  const PhysicalPieces::Piece* piece = pieces.PieceOf(63 * kGranule);
  ASSERT_NE(piece, nullptr);
  EXPECT_EQ(piece->committed, ~uint64_t{0});
  EXPECT_TRUE(pieces.Exclusive(0, 64 * kGranule, /*committed=*/true));
}

TEST(PhysicalPiecesTest, AddedPieceIsCommittedWholeAndFoundByAnyByte) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(4 * kGranule, 7, 3 * kGranule);
  EXPECT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces.bytes(), 3 * kGranule);

  const PhysicalPieces::Piece* piece = pieces.PieceOf(4 * kGranule);
  ASSERT_NE(piece, nullptr);
  EXPECT_EQ(piece->offset, 4 * kGranule);
  EXPECT_EQ(piece->handle, 7u);
  EXPECT_EQ(piece->length, 3 * kGranule);
  EXPECT_EQ(piece->committed, 0b111u);
  EXPECT_FALSE(piece->exported);
  EXPECT_EQ(pieces.PieceOf(7 * kGranule - 1), piece);
  EXPECT_EQ(pieces.PieceOf(4 * kGranule - 1), nullptr);
  EXPECT_EQ(pieces.PieceOf(7 * kGranule), nullptr);

  // A second piece at the same offset is not added.
  pieces.Add(4 * kGranule, 8, kGranule);
  EXPECT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces.PieceOf(4 * kGranule)->handle, 7u);
}

TEST(PhysicalPiecesTest, DecommitKeepsAPieceUntilItsLastGranuleGoes) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(0, 1, 4 * kGranule);

  EXPECT_TRUE(pieces.Uncommit(kGranule, 2 * kGranule).empty());
  ASSERT_NE(pieces.PieceOf(0), nullptr);
  EXPECT_EQ(pieces.PieceOf(0)->committed, 0b1001u);
  EXPECT_EQ(pieces.bytes(), 4 * kGranule);  // still held, committed or not

  // Uncommitting granules already uncommitted changes nothing.
  EXPECT_TRUE(pieces.Uncommit(kGranule, kGranule).empty());
  EXPECT_EQ(pieces.PieceOf(0)->committed, 0b1001u);

  EXPECT_TRUE(pieces.Uncommit(0, kGranule).empty());
  const std::vector<PhysicalPieces::Piece> emptied = pieces.Uncommit(3 * kGranule, kGranule);
  ASSERT_EQ(emptied.size(), 1u);
  EXPECT_EQ(emptied[0].offset, 0u);
  EXPECT_EQ(emptied[0].handle, 1u);
  EXPECT_EQ(emptied[0].length, 4 * kGranule);
  EXPECT_EQ(emptied[0].committed, 0u);
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(pieces.PieceOf(0), nullptr);
}

TEST(PhysicalPiecesTest, UncommitAcrossPiecesReturnsOnlyThoseLeftEmpty) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(0, 1, 2 * kGranule);
  pieces.Add(2 * kGranule, 2, 2 * kGranule);
  pieces.Add(4 * kGranule, 3, 2 * kGranule);
  // Granules 1..4: the middle piece empties, the outer two keep a granule.
  EXPECT_EQ(OffsetsOf(pieces.Uncommit(kGranule, 4 * kGranule)),
            (std::vector<uint64_t>{2 * kGranule}));
  EXPECT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces.PieceOf(0)->committed, 0b01u);
  EXPECT_EQ(pieces.PieceOf(4 * kGranule)->committed, 0b10u);
  // Then both, in order.
  EXPECT_EQ(OffsetsOf(pieces.Uncommit(0, 6 * kGranule)),
            (std::vector<uint64_t>{0, 4 * kGranule}));
  EXPECT_TRUE(pieces.empty());
}

TEST(PhysicalPiecesTest, CommitRecommitsMappedGranulesAndAsksOnlyForTheRest) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(2 * kGranule, 1, 4 * kGranule);
  ASSERT_TRUE(pieces.Uncommit(3 * kGranule, 2 * kGranule).empty());
  ASSERT_EQ(pieces.PieceOf(2 * kGranule)->committed, 0b1001u);

  // Granules 0..7: 2..5 lie in the piece, committed again for free; the
  // runs before and after it are asked for, not joined across it.
  EXPECT_EQ(pieces.Commit(0, 8 * kGranule),
            (Runs{{0, 2 * kGranule}, {6 * kGranule, 2 * kGranule}}));
  EXPECT_EQ(pieces.PieceOf(2 * kGranule)->committed, 0b1111u);
  EXPECT_EQ(pieces.size(), 1u);

  // Everything mapped: nothing to ask for.
  EXPECT_TRUE(pieces.Commit(2 * kGranule, 4 * kGranule).empty());
}

TEST(PhysicalPiecesTest, FailedCommitIsUndoneByUncommit) {
  // CudaDevice's all-or-nothing: pieces mapped before a failure are added,
  // then the whole range is uncommitted, which hands them back.
  PhysicalPieces pieces(kGranule, kMaxPiece);
  const Runs runs = pieces.Commit(0, 20 * kGranule);
  ASSERT_EQ(runs.size(), 2u);
  pieces.Add(runs[0].first, 1, runs[0].second);  // the second failed
  EXPECT_EQ(OffsetsOf(pieces.Uncommit(0, 20 * kGranule)), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(pieces.empty());
}

TEST(PhysicalPiecesTest, TakeAllEmptiesTheTable) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  PhysicalPieces::Handle handle = 1;
  CommitAndAdd(pieces, 0, 20 * kGranule, handle);
  ASSERT_TRUE(pieces.Uncommit(0, kGranule).empty());
  EXPECT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces.bytes(), 20 * kGranule);
  // Taken whether committed or not.
  EXPECT_EQ(OffsetsOf(pieces.TakeAll()), (std::vector<uint64_t>{0, 16 * kGranule}));
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(pieces.bytes(), 0u);
}

TEST(PhysicalPiecesTest, ExclusiveRefusesEmptyAndUnalignedRanges) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  EXPECT_TRUE(pieces.Exclusive(0, kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(0, 0, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(1, kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(0, kGranule + 1, /*committed=*/false));
}

TEST(PhysicalPiecesTest, ExclusiveWhenNoPieceReachesPastTheRange) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(2 * kGranule, 1, 2 * kGranule);  // granules 2..3
  pieces.Add(6 * kGranule, 2, 2 * kGranule);  // granules 6..7

  EXPECT_TRUE(pieces.Exclusive(2 * kGranule, 2 * kGranule, /*committed=*/false));
  EXPECT_TRUE(pieces.Exclusive(0, 10 * kGranule, /*committed=*/false));
  // No pieces at all there.
  EXPECT_TRUE(pieces.Exclusive(4 * kGranule, 2 * kGranule, /*committed=*/false));
  // A piece starting before, or ending after, the range.
  EXPECT_FALSE(pieces.Exclusive(3 * kGranule, 2 * kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(2 * kGranule, kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(4 * kGranule, 3 * kGranule, /*committed=*/false));
}

TEST(PhysicalPiecesTest, ExclusiveCommittedWantsPiecesTilingTheRangeWhole) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(0, 1, 2 * kGranule);
  pieces.Add(2 * kGranule, 2, 2 * kGranule);
  pieces.Add(6 * kGranule, 3, 2 * kGranule);

  EXPECT_TRUE(pieces.Exclusive(0, 4 * kGranule, /*committed=*/true));
  EXPECT_TRUE(pieces.Exclusive(2 * kGranule, 2 * kGranule, /*committed=*/true));
  // A gap at granules 4..5.
  EXPECT_TRUE(pieces.Exclusive(0, 8 * kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(0, 8 * kGranule, /*committed=*/true));
  // Nothing there.
  EXPECT_FALSE(pieces.Exclusive(4 * kGranule, 2 * kGranule, /*committed=*/true));

  // A granule uncommitted in a piece that stays mapped.
  ASSERT_TRUE(pieces.Uncommit(3 * kGranule, kGranule).empty());
  EXPECT_TRUE(pieces.Exclusive(0, 4 * kGranule, /*committed=*/false));
  EXPECT_FALSE(pieces.Exclusive(0, 4 * kGranule, /*committed=*/true));
  EXPECT_TRUE(pieces.Exclusive(0, 2 * kGranule, /*committed=*/true));
}

TEST(PhysicalPiecesTest, MarkExportedMarksThePiecesOfTheRangeAndUncommitKeepsTheMark) {
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(0, 1, kGranule);
  pieces.Add(kGranule, 2, 2 * kGranule);
  pieces.Add(3 * kGranule, 3, kGranule);
  pieces.Add(4 * kGranule, 4, kGranule);
  ASSERT_TRUE(pieces.Exclusive(kGranule, 3 * kGranule, /*committed=*/true));

  const std::vector<PhysicalPieces::Piece> marked = pieces.MarkExported(kGranule, 3 * kGranule);
  ASSERT_EQ(marked.size(), 2u);
  EXPECT_EQ(marked[0].handle, 2u);
  EXPECT_EQ(marked[0].length, 2 * kGranule);
  EXPECT_TRUE(marked[0].exported);
  EXPECT_EQ(marked[1].handle, 3u);
  EXPECT_EQ(marked[1].length, kGranule);
  EXPECT_TRUE(marked[1].exported);
  EXPECT_FALSE(pieces.PieceOf(0)->exported);
  EXPECT_TRUE(pieces.PieceOf(2 * kGranule)->exported);
  EXPECT_FALSE(pieces.PieceOf(4 * kGranule)->exported);

  // The pieces handed back when emptied say they were exported, for the
  // caller to zero them.
  const std::vector<PhysicalPieces::Piece> emptied = pieces.Uncommit(0, 5 * kGranule);
  ASSERT_EQ(emptied.size(), 4u);
  EXPECT_FALSE(emptied[0].exported);
  EXPECT_TRUE(emptied[1].exported);
  EXPECT_TRUE(emptied[2].exported);
  EXPECT_FALSE(emptied[3].exported);
}

TEST(PhysicalPiecesTest, ExportedMarkIsGoneWithThePiece) {
  // A new piece mapped where an exported one was starts unmarked.
  PhysicalPieces pieces(kGranule, kMaxPiece);
  pieces.Add(0, 1, kGranule);
  ASSERT_EQ(pieces.MarkExported(0, kGranule).size(), 1u);
  ASSERT_EQ(pieces.Uncommit(0, kGranule).size(), 1u);
  PhysicalPieces::Handle handle = 2;
  CommitAndAdd(pieces, 0, kGranule, handle);
  ASSERT_NE(pieces.PieceOf(0), nullptr);
  EXPECT_EQ(pieces.PieceOf(0)->handle, 2u);
  EXPECT_FALSE(pieces.PieceOf(0)->exported);
}

}  // namespace
}  // namespace cudafs
