// How a map request's answer is laid out (fs/share/share_mapping.h), from
// copy plans and exported memory made up here: the reply, the batches of
// pieces, their GPUs, and the limits of one reply.
#include "fs/share/share_mapping.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

constexpr uint64_t kMiB = 1 << 20;

template <typename T>
T Decode(const ShareMessage& message) {
  T value = {};
  EXPECT_EQ(message.bytes.size(), sizeof value);
  std::memcpy(&value, message.bytes.data(), std::min(message.bytes.size(), sizeof value));
  return value;
}

std::string BusId(int gpu) { return absl::StrFormat("0000:%02x:00.0", gpu); }

class FakeExport : public ExportedMemory {
 public:
  FakeExport(Kind kind, uint64_t size, std::vector<ExportedPiece> pieces)
      : kind_(kind), size_(size), pieces_(std::move(pieces)) {}
  Kind kind() const override { return kind_; }
  uint64_t size() const override { return size_; }
  absl::Span<const ExportedPiece> pieces() const override { return pieces_; }

 private:
  Kind kind_;
  uint64_t size_;
  std::vector<ExportedPiece> pieces_;
};

Filesystem::CopyPlan Plan(ExportedMemory::Kind kind, std::vector<int> gpus) {
  Filesystem::CopyPlan plan;
  for (size_t i = 0; i < gpus.size(); ++i) {
    plan.pieces.push_back({kind, gpus[i] < 0 ? "" : BusId(gpus[i]), (i + 1) * 2 * kMiB});
    plan.size += plan.pieces.back().bytes;
  }
  plan.size -= 100;  // the file ends inside its last piece
  return plan;
}

TEST(ShareCopyPlanOutcomeTest, HostMemoryToBring) {
  absl::StatusOr<ShareOutcome> outcome =
      CopyPlanOutcome(42, Plan(ExportedMemory::Kind::kHost, {-1, -1}));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->messages.size(), 2u);
  const ShareReply reply = Decode<ShareReply>(outcome->messages[0]);
  EXPECT_EQ(reply.magic, ShareMagic(kShareVersion));
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.flags, kReplyProvideMemory);
  EXPECT_EQ(reply.kind, kShareHost);
  EXPECT_EQ(reply.gpus, 0u);
  EXPECT_EQ(reply.pieces, 2u);
  EXPECT_EQ(reply.size, 6 * kMiB - 100);
  EXPECT_EQ(reply.memory_bytes, 6 * kMiB);
  const SharePieces pieces = Decode<SharePieces>(outcome->messages[1]);
  EXPECT_EQ(pieces.magic, ShareMagic(kShareVersion));
  EXPECT_EQ(pieces.count, 2u);
  EXPECT_EQ(pieces.piece_size[0], 2 * kMiB);
  EXPECT_EQ(pieces.piece_size[1], 4 * kMiB);
  for (const ShareMessage& message : outcome->messages) EXPECT_TRUE(message.fds.empty());
  // What the fill is checked against.
  EXPECT_EQ(outcome->next, ShareNext::kFill);
  EXPECT_EQ(outcome->ino, 42u);
  EXPECT_EQ(outcome->kind, kShareHost);
  EXPECT_EQ(outcome->piece_bytes, (std::vector<uint64_t>{2 * kMiB, 4 * kMiB}));
  EXPECT_EQ(outcome->held, nullptr);
}

TEST(ShareCopyPlanOutcomeTest, EachGpuNamedOnceInTheOrderItComes) {
  absl::StatusOr<ShareOutcome> outcome =
      CopyPlanOutcome(7, Plan(ExportedMemory::Kind::kCuda, {3, 1, 3, 2, 1}));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const ShareReply reply = Decode<ShareReply>(outcome->messages[0]);
  EXPECT_EQ(reply.kind, kShareCuda);
  ASSERT_EQ(reply.gpus, 3u);
  EXPECT_EQ(std::string(reply.pci_bus_id[0]), BusId(3));
  EXPECT_EQ(std::string(reply.pci_bus_id[1]), BusId(1));
  EXPECT_EQ(std::string(reply.pci_bus_id[2]), BusId(2));
  const SharePieces pieces = Decode<SharePieces>(outcome->messages[1]);
  const uint8_t expected[] = {0, 1, 0, 2, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(pieces.piece_gpu[i], expected[i]) << i;
  EXPECT_EQ(outcome->kind, kShareCuda);
}

TEST(ShareCopyPlanOutcomeTest, WhatOneReplyCannotCarryIsEopnotsupp) {
  EXPECT_EQ(ToErrno(CopyPlanOutcome(1, Plan(ExportedMemory::Kind::kHost, {})).status()),
            EOPNOTSUPP);
  EXPECT_EQ(ToErrno(CopyPlanOutcome(
                        1, Plan(ExportedMemory::Kind::kHost, std::vector<int>(kShareBatch + 1, -1)))
                        .status()),
            EOPNOTSUPP);
  EXPECT_TRUE(
      CopyPlanOutcome(1, Plan(ExportedMemory::Kind::kHost, std::vector<int>(kShareBatch, -1)))
          .ok());
  std::vector<int> gpus;
  for (uint32_t g = 0; g <= kShareMaxGpus; ++g) gpus.push_back(static_cast<int>(g));
  const absl::Status too_many_gpus =
      CopyPlanOutcome(1, Plan(ExportedMemory::Kind::kCuda, gpus)).status();
  EXPECT_EQ(ToErrno(too_many_gpus), EOPNOTSUPP);
  EXPECT_NE(std::string(too_many_gpus.message()).find("GPUs"), std::string::npos);
  gpus.pop_back();
  EXPECT_TRUE(CopyPlanOutcome(1, Plan(ExportedMemory::Kind::kCuda, gpus)).ok());
}

std::unique_ptr<ExportedMemory> Export(ExportedMemory::Kind kind, size_t count, int gpus = 1) {
  std::vector<ExportedPiece> pieces;
  for (size_t i = 0; i < count; ++i) {
    pieces.push_back(
        {1000 + static_cast<int>(i), 32 * kMiB,
         kind == ExportedMemory::Kind::kCuda ? BusId(static_cast<int>(i) % gpus) : ""});
  }
  return std::make_unique<FakeExport>(kind, count * 32 * kMiB - 5, std::move(pieces));
}

// 130 pieces: the reply, then batches of 64, 64 and 2, each with its
// pieces' descriptors in order.
TEST(SharedMappingOutcomeTest, PiecesGoInBatchesWithTheirDescriptors) {
  std::unique_ptr<ExportedMemory> exported = Export(ExportedMemory::Kind::kCuda, 130, 2);
  const ExportedMemory* memory = exported.get();
  absl::StatusOr<ShareOutcome> outcome = SharedMappingOutcome(std::move(exported));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->messages.size(), 4u);
  const ShareReply reply = Decode<ShareReply>(outcome->messages[0]);
  EXPECT_EQ(reply.error, 0);
  EXPECT_EQ(reply.flags, 0u);
  EXPECT_EQ(reply.kind, kShareCuda);
  EXPECT_EQ(reply.pieces, 130u);
  EXPECT_EQ(reply.size, 130 * 32 * kMiB - 5);
  EXPECT_EQ(reply.gpus, 2u);
  EXPECT_TRUE(outcome->messages[0].fds.empty());
  int next_fd = 1000;
  const uint32_t counts[] = {64, 64, 2};
  for (int b = 0; b < 3; ++b) {
    const ShareMessage& message = outcome->messages[1 + b];
    const SharePieces batch = Decode<SharePieces>(message);
    ASSERT_EQ(batch.count, counts[b]);
    ASSERT_EQ(message.fds.size(), counts[b]);
    for (uint32_t i = 0; i < batch.count; ++i, ++next_fd) {
      EXPECT_EQ(message.fds[i], next_fd);
      EXPECT_EQ(batch.piece_size[i], 32 * kMiB);
      EXPECT_EQ(batch.piece_gpu[i], (next_fd - 1000) % 2);
    }
  }
  EXPECT_EQ(outcome->held.get(), memory);  // lent descriptors stay open
  EXPECT_EQ(outcome->next, ShareNext::kImported);
}

TEST(SharedMappingOutcomeTest, HostMemoryNamesNoGpu) {
  absl::StatusOr<ShareOutcome> outcome =
      SharedMappingOutcome(Export(ExportedMemory::Kind::kHost, 3));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const ShareReply reply = Decode<ShareReply>(outcome->messages[0]);
  EXPECT_EQ(reply.kind, kShareHost);
  EXPECT_EQ(reply.gpus, 0u);
  ASSERT_EQ(outcome->messages.size(), 2u);
  EXPECT_EQ(outcome->messages[1].fds, (std::vector<int>{1000, 1001, 1002}));
}

TEST(SharedMappingOutcomeTest, MoreGpusThanAReplyNamesIsEopnotsupp) {
  EXPECT_EQ(ToErrno(SharedMappingOutcome(Export(ExportedMemory::Kind::kCuda, 40,
                                                static_cast<int>(kShareMaxGpus) + 1))
                        .status()),
            EOPNOTSUPP);
  EXPECT_TRUE(
      SharedMappingOutcome(Export(ExportedMemory::Kind::kCuda, 40, static_cast<int>(kShareMaxGpus)))
          .ok());
}

}  // namespace
}  // namespace cudafs
