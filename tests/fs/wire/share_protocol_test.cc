// The wire format (fs/wire/share_protocol.h) pinned: a daemon and a client
// library of one version must agree byte for byte, and the reply's layout
// up to its message must stay what clients of version 3 read. A change
// here is a protocol change: a new kShareVersion, not an edit.
#include "fs/wire/share_protocol.h"

#include <bit>
#include <cstddef>
#include <cstring>
#include <string>

#include "fs/wire/descriptor_socket.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

TEST(ShareProtocolTest, MagicIsCfsAndTheVersionsDigit) {
  if constexpr (std::endian::native != std::endian::little) GTEST_SKIP() << "little-endian bytes";
  for (uint32_t version = 1; version <= 9; ++version) {
    const uint32_t magic = ShareMagic(version);
    char bytes[4];
    std::memcpy(bytes, &magic, sizeof bytes);
    EXPECT_EQ(std::string(bytes, 4), "CFS" + std::to_string(version));
    EXPECT_EQ(ShareVersionOf(magic), version);
  }
}

TEST(ShareProtocolTest, OtherMagicsAnnounceNoVersion) {
  const auto magic_of = [](const char* bytes) {
    uint32_t magic;
    std::memcpy(&magic, bytes, sizeof magic);
    return magic;
  };
  EXPECT_EQ(ShareVersionOf(0), 0u);
  EXPECT_EQ(ShareVersionOf(0xffffffffu), 0u);
  EXPECT_EQ(ShareVersionOf(magic_of("CFS0")), 0u);  // no version 0
  EXPECT_EQ(ShareVersionOf(magic_of("CFS:")), 0u);  // past '9'
  EXPECT_EQ(ShareVersionOf(magic_of("CFT4")), 0u);
  EXPECT_EQ(ShareVersionOf(magic_of("GET ")), 0u);
}

TEST(ShareProtocolTest, MessagesHaveTheirFixedLayout) {
  EXPECT_EQ(sizeof(ShareRequest), 56u);
  EXPECT_EQ(offsetof(ShareRequest, op), 4u);
  EXPECT_EQ(offsetof(ShareRequest, flags), 8u);
  EXPECT_EQ(offsetof(ShareRequest, reserved), 12u);
  EXPECT_EQ(offsetof(ShareRequest, memory_bytes), 16u);
  // Version 5's addition.
  EXPECT_EQ(offsetof(ShareRequest, gpu), 24u);

  EXPECT_EQ(sizeof(SharePieces), 584u);
  EXPECT_EQ(offsetof(SharePieces, count), 4u);
  EXPECT_EQ(offsetof(SharePieces, piece_size), 8u);
  EXPECT_EQ(offsetof(SharePieces, piece_gpu), 8u + 8 * kShareBatch);
}

// What a client of any version since 3 reads of a refusal.
TEST(ShareProtocolTest, TheReplyUpToItsMessageIsEveryVersionsSince3) {
  EXPECT_EQ(offsetof(ShareReply, error), 4u);
  EXPECT_EQ(offsetof(ShareReply, kind), 8u);
  EXPECT_EQ(offsetof(ShareReply, gpus), 12u);
  EXPECT_EQ(offsetof(ShareReply, size), 16u);
  EXPECT_EQ(offsetof(ShareReply, pieces), 24u);
  EXPECT_EQ(offsetof(ShareReply, flags), 28u);
  EXPECT_EQ(offsetof(ShareReply, pci_bus_id), 32u);
  EXPECT_EQ(offsetof(ShareReply, message), 32u + kShareMaxGpus * 32);
  EXPECT_EQ(sizeof(ShareReply::message), 256u);
  // Version 4's addition, after the message.
  EXPECT_EQ(offsetof(ShareReply, memory_bytes), 32u + kShareMaxGpus * 32 + 256);
  EXPECT_EQ(sizeof(ShareReply), 808u);
}

TEST(ShareProtocolTest, ConstantsAreThisVersions) {
  EXPECT_EQ(kShareVersion, 5u);
  EXPECT_EQ(kShareMap, 1u);
  EXPECT_EQ(kShareImported, 2u);
  EXPECT_EQ(kShareSync, 3u);
  EXPECT_EQ(kShareFill, 4u);
  EXPECT_EQ(kShareMakeRoom, 5u);
  EXPECT_EQ(kShareWritable, 1u);
  EXPECT_EQ(kShareMapFlags, 1u);
  EXPECT_EQ(kShareRoomAll, 2u);
  EXPECT_EQ(kShareRoomHold, 4u);
  EXPECT_EQ(kShareRoomFlags, 6u);
  EXPECT_EQ(kShareHost, 1u);
  EXPECT_EQ(kShareCuda, 2u);
  EXPECT_EQ(kReplyProvideMemory, 1u);
  EXPECT_STREQ(kShareSocketAttribute, "user.cudafs.socket");
}

// A batch of pieces goes in one message: its descriptors must fit one
// sendmsg(2) (the kernel's SCM_MAX_FD is 253), and the helpers' buffer.
TEST(ShareProtocolTest, ABatchFitsOneMessage) {
  EXPECT_LE(kShareBatch, kMaxDescriptorsPerMessage);
  EXPECT_LE(kMaxDescriptorsPerMessage, 253u);
}

}  // namespace
}  // namespace cudafs
