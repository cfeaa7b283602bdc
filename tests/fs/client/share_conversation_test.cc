// The client's side of the share protocol (fs/client/share_conversation.h)
// against a daemon played by hand over a socketpair: what it answers is
// checked, and a short, garbled, oversized or lying answer is an error in
// words, never a crash, a hang or a leaked descriptor.
#include "fs/client/share_conversation.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "fs/client/client_error.h"
#include "fs/wire/descriptor_socket.h"
#include "gtest/gtest.h"
#include "tests/support/open_descriptors.h"

namespace cudafs::client {
namespace {

constexpr uint32_t kMagic = ShareMagic(kShareVersion);

using cudafs_test::OpenDescriptors;

ShareReply Reply(int error = 0, const char* why = "") {
  ShareReply reply = {};
  reply.magic = kMagic;
  reply.error = error;
  std::snprintf(reply.message, sizeof reply.message, "%s", why);
  return reply;
}

SharePieces Batch(uint32_t count, uint64_t size = 2 << 20) {
  SharePieces batch = {};
  batch.magic = kMagic;
  batch.count = count;
  for (uint32_t i = 0; i < count; ++i) batch.piece_size[i] = size;
  return batch;
}

class ShareConversationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends_), 0); }
  void TearDown() override {
    for (int end : ends_) {
      if (end >= 0) close(end);
    }
  }
  // The daemon's end sends `size` bytes of `message`, with `fds`.
  void DaemonSends(const void* message, size_t size, std::vector<int> fds = {}) {
    ASSERT_EQ(SendWithDescriptors(daemon(), message, size, fds.data(), fds.size(), 0),
              static_cast<ssize_t>(size));
  }
  template <typename T>
  void DaemonSends(const T& message, std::vector<int> fds = {}) {
    DaemonSends(&message, sizeof message, std::move(fds));
  }
  void DaemonHangsUp() {
    close(ends_[0]);
    ends_[0] = -1;
  }
  int daemon() const { return ends_[0]; }
  int client() const { return ends_[1]; }

  int ends_[2] = {-1, -1};
};

TEST_F(ShareConversationTest, AReplyIsRead) {
  ShareReply sent = Reply();
  sent.size = 12345;
  sent.gpus = 1;
  std::snprintf(sent.pci_bus_id[0], sizeof sent.pci_bus_id[0], "0000:65:00.0");
  DaemonSends(sent);
  ShareReply reply;
  ASSERT_EQ(ReceiveReply(client(), &reply), 0) << LastError();
  EXPECT_EQ(reply.size, 12345u);
  EXPECT_STREQ(reply.pci_bus_id[0], "0000:65:00.0");
}

TEST_F(ShareConversationTest, ARefusalIsItsErrnoAndWords) {
  DaemonSends(Reply(EACCES, "this mount lets only its owner in"));
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EACCES);
  EXPECT_STREQ(LastError(), "this mount lets only its owner in");
}

// Strings from the daemon are cut to their fields, whatever it sent.
TEST_F(ShareConversationTest, UnterminatedStringsStayInTheirFields) {
  ShareReply sent = Reply(ENOENT);
  std::memset(sent.message, 'x', sizeof sent.message);
  std::memset(sent.pci_bus_id, 'y', sizeof sent.pci_bus_id);
  DaemonSends(sent);
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -ENOENT);
  EXPECT_EQ(std::strlen(LastError()), sizeof sent.message - 1);
  for (const auto& bus_id : reply.pci_bus_id) EXPECT_EQ(std::strlen(bus_id), sizeof bus_id - 1);
}

TEST_F(ShareConversationTest, AShortReplyThenTheEndIsEio) {
  const ShareReply sent = Reply();
  DaemonSends(&sent, 100);
  DaemonHangsUp();
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EIO);
  EXPECT_STREQ(LastError(), "the cudafs daemon sent no valid reply");
}

TEST_F(ShareConversationTest, NoReplyAtAllIsEio) {
  DaemonHangsUp();
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EIO);
}

TEST_F(ShareConversationTest, NoCudafsMagicIsEio) {
  ShareReply sent = Reply(EPERM);
  sent.magic = 0x20544547;  // "GET "
  DaemonSends(sent);
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EIO);
}

// A daemon of another version refuses in a reply of its own version's
// length; its error, or else the mismatch, is what the caller hears.
TEST_F(ShareConversationTest, AnotherVersionsDaemonIsHeard) {
  ShareReply sent = Reply(EPROTONOSUPPORT, "this cudafs daemon speaks share protocol 6");
  sent.magic = ShareMagic(6);
  DaemonSends(&sent, offsetof(ShareReply, memory_bytes));
  DaemonHangsUp();
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EPROTONOSUPPORT);
  EXPECT_STREQ(LastError(), "this cudafs daemon speaks share protocol 6");
}

TEST_F(ShareConversationTest, AnotherVersionsSuccessIsEprotonosupport) {
  ShareReply sent = Reply();
  sent.magic = ShareMagic(3);
  DaemonSends(sent);
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EPROTONOSUPPORT);
  EXPECT_NE(std::string(LastError()).find("protocol 3"), std::string::npos) << LastError();
}

TEST_F(ShareConversationTest, TooManyGpusIsEio) {
  ShareReply sent = Reply();
  sent.gpus = kShareMaxGpus + 1;
  DaemonSends(sent);
  ShareReply reply;
  EXPECT_EQ(ReceiveReply(client(), &reply), -EIO);
  EXPECT_STREQ(LastError(), "the cudafs daemon named too many GPUs");
}

// Descriptors where a reply carries none are closed, not kept.
TEST_F(ShareConversationTest, DescriptorsWithAReplyAreNotKept) {
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int before = OpenDescriptors();
  DaemonSends(Reply(), {file, file, file});
  ShareReply reply;
  ReceiveReply(client(), &reply);
  EXPECT_EQ(OpenDescriptors(), before);
  close(file);
}

// A shared mapping's pieces: 70 in two batches, each piece with its
// descriptor.
TEST_F(ShareConversationTest, PiecesComeInBatchesWithDescriptors) {
  ShareReply reply = Reply();
  reply.kind = kShareHost;
  reply.pieces = 70;
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  DaemonSends(Batch(64), std::vector<int>(64, file));
  DaemonSends(Batch(6, 4 << 20), std::vector<int>(6, file));
  Pieces pieces;
  ASSERT_EQ(ReceivePieces(client(), reply, /*plan=*/false, &pieces), 0) << LastError();
  EXPECT_EQ(pieces.fds.size(), 70u);
  ASSERT_EQ(pieces.sizes.size(), 70u);
  EXPECT_EQ(pieces.sizes[63], 2u << 20);
  EXPECT_EQ(pieces.sizes[64], 4u << 20);
  EXPECT_EQ(pieces.total, 64 * (2u << 20) + 6 * (4u << 20));
  for (int fd : pieces.fds) close(fd);
  close(file);
}

TEST_F(ShareConversationTest, ACopysPlanHasNoDescriptors) {
  ShareReply reply = Reply();
  reply.kind = kShareCuda;
  reply.gpus = 2;
  reply.pieces = 2;
  reply.flags = kReplyProvideMemory;
  SharePieces batch = Batch(2);
  batch.piece_gpu[1] = 1;
  DaemonSends(batch);
  Pieces pieces;
  ASSERT_EQ(ReceivePieces(client(), reply, /*plan=*/true, &pieces), 0) << LastError();
  EXPECT_TRUE(pieces.fds.empty());
  EXPECT_EQ(pieces.gpus, (std::vector<uint8_t>{0, 1}));
}

// Lists of pieces that are not what the reply announced.
TEST_F(ShareConversationTest, MalformedPiecesAreEio) {
  struct Case {
    const char* what;
    SharePieces batch;
    size_t fds;  // sent with it
    bool plan;
  };
  SharePieces wrong_magic = Batch(1);
  wrong_magic.magic = ShareMagic(3);
  SharePieces unnamed_gpu = Batch(1);
  unnamed_gpu.piece_gpu[0] = 2;  // the reply names 2
  SharePieces too_many = Batch(1);
  too_many.count = kShareBatch + 1;
  const Case cases[] = {
      {"no pieces", Batch(0), 0, false},
      {"fewer descriptors than pieces", Batch(3), 2, false},
      {"more descriptors than pieces", Batch(1), 2, false},
      {"more pieces than the reply's", Batch(5), 5, false},
      {"a count past a batch", too_many, 0, true},
      {"another magic", wrong_magic, 1, false},
      {"a GPU the reply does not name", unnamed_gpu, 0, true},
      {"descriptors with a plan", Batch(1), 1, true},
  };
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (const Case& c : cases) {
    int ends[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    ShareReply reply = Reply();
    reply.kind = kShareCuda;
    reply.gpus = 2;
    reply.pieces = 4;
    ASSERT_EQ(SendWithDescriptors(ends[0], &c.batch, sizeof c.batch,
                                  std::vector<int>(c.fds, file).data(), c.fds, 0),
              static_cast<ssize_t>(sizeof c.batch));
    // Then what would complete the list, had the bad batch been taken.
    for (int i = 0; i < 4; ++i) {
      SharePieces one = Batch(1);
      const int with = c.plan ? 0 : 1;
      ASSERT_EQ(SendWithDescriptors(ends[0], &one, sizeof one, &file, with, 0),
                static_cast<ssize_t>(sizeof one));
    }
    Pieces pieces;
    EXPECT_EQ(ReceivePieces(ends[1], reply, c.plan, &pieces), -EIO) << c.what;
    EXPECT_NE(std::string(LastError()).find("the cudafs daemon sent"), std::string::npos)
        << c.what << ": " << LastError();
    for (int fd : pieces.fds) close(fd);
    close(ends[0]);
    close(ends[1]);
  }
  close(file);
}

TEST_F(ShareConversationTest, ATruncatedBatchIsEio) {
  ShareReply reply = Reply();
  reply.pieces = 1;
  const SharePieces batch = Batch(1);
  DaemonSends(&batch, sizeof batch / 2);
  DaemonHangsUp();
  Pieces pieces;
  EXPECT_EQ(ReceivePieces(client(), reply, false, &pieces), -EIO);
}

TEST_F(ShareConversationTest, AskSendsTheRequestAndItsDescriptors) {
  DaemonSends(Reply());  // answered before asked: the socket keeps it
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ShareReply reply;
  ASSERT_EQ(Ask(client(), kShareFill, 0, 4096, {file}, &reply), 0) << LastError();
  ShareRequest request;
  std::vector<int> fds;
  bool refused = false;
  ASSERT_EQ(
      ReceiveWithDescriptors(daemon(), &request, sizeof request, MSG_WAITALL, 1, &fds, &refused),
      static_cast<ssize_t>(sizeof request));
  EXPECT_EQ(request.magic, kMagic);
  EXPECT_EQ(request.op, kShareFill);
  EXPECT_EQ(request.flags, 0u);
  EXPECT_EQ(request.reserved, 0u);
  EXPECT_EQ(request.memory_bytes, 4096u);
  EXPECT_EQ(fds.size(), 1u);
  for (int fd : fds) close(fd);
  close(file);
}

// A daemon that turned the connection away and closed it: its refusal,
// already in the socket, is what the caller hears, not a broken pipe.
TEST_F(ShareConversationTest, ARefusalBeforeTheRequestIsHeard) {
  DaemonSends(Reply(EAGAIN, "the cudafs daemon has too many requests at once: try again"));
  DaemonHangsUp();
  ShareReply reply;
  EXPECT_EQ(Ask(client(), kShareMap, 0, 0, {}, &reply), -EAGAIN);
  EXPECT_NE(std::string(LastError()).find("too many"), std::string::npos);
}

TEST_F(ShareConversationTest, ADaemonGoneIsEioInWords) {
  DaemonHangsUp();
  ShareReply reply;
  EXPECT_EQ(Ask(client(), kShareMap, 0, 0, {}, &reply), -EIO);
  EXPECT_NE(std::string(LastError()).find("cannot send to the cudafs daemon"), std::string::npos)
      << LastError();
}

TEST_F(ShareConversationTest, ImportedIsAWellFormedRequest) {
  SendImported(client());
  ShareRequest request;
  ASSERT_EQ(read(daemon(), &request, sizeof request), static_cast<ssize_t>(sizeof request));
  EXPECT_EQ(request.magic, kMagic);
  EXPECT_EQ(request.op, kShareImported);
  EXPECT_EQ(request.flags, 0u);
  EXPECT_EQ(request.memory_bytes, 0u);
}

// A daemon that accepted and then says nothing: each wait for it ends
// after the bound, in words.
TEST_F(ShareConversationTest, ASilentDaemonTimesOutInWords) {
  ASSERT_EQ(BoundReplies(client(), 1), 0) << LastError();
  const auto start = std::chrono::steady_clock::now();
  ShareReply reply;
  EXPECT_EQ(Ask(client(), kShareMap, 0, 0, {}, &reply), -ETIMEDOUT);
  EXPECT_STREQ(LastError(), "the cudafs daemon did not answer within 1 s");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Also between the reply and its pieces.
  DaemonSends(Reply());
  ASSERT_EQ(ReceiveReply(client(), &reply), 0) << LastError();
  reply.pieces = 1;
  Pieces pieces;
  EXPECT_EQ(ReceivePieces(client(), reply, /*plan=*/false, &pieces), -ETIMEDOUT);
}

TEST(ReplyBoundTest, AFloorAndTheTimeOfASlowCopy) {
  EXPECT_EQ(ReplyBoundSeconds(0), 30);
  EXPECT_EQ(ReplyBoundSeconds(uint64_t{10} << 30), 30 + 80);
  EXPECT_EQ(ReplyBoundSeconds(UINT64_MAX), INT_MAX);
}

// A listener on a fresh abstract address, run as `uid` by a child process:
// it accepts one connection, and counts what arrives on it until the
// other end hangs up.
class Listener {
 public:
  explicit Listener(uid_t uid) {
    static int made = 0;
    address_ = "@cudafs-test-listener-" + std::to_string(getpid()) + "-" + std::to_string(++made);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(report_, O_CLOEXEC) != 0) return;
    child_ = fork();
    if (child_ == 0) {
      sockaddr_un address = {};
      address.sun_family = AF_UNIX;
      std::memcpy(address.sun_path + 1, address_.data() + 1, address_.size() - 1);
      const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      // The uid first: SO_PEERCRED tells who called listen().
      if (setresuid(uid, uid, uid) != 0 ||
          bind(listener, reinterpret_cast<sockaddr*>(&address),
               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size())) != 0 ||
          listen(listener, 1) != 0 || write(ready[1], "r", 1) != 1) {
        _exit(1);
      }
      const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      int64_t received = 0;
      char buffer[4096];
      for (ssize_t got; connection >= 0 && (got = read(connection, buffer, sizeof buffer)) > 0;) {
        received += got;
      }
      _exit(write(report_[1], &received, sizeof received) == sizeof received ? 0 : 1);
    }
    close(ready[1]);
    char byte;
    listening_ = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    close(report_[1]);
  }
  ~Listener() {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    close(report_[0]);
  }

  bool listening() const { return listening_; }
  const std::string& address() const { return address_; }
  // The bytes that came on the connection accepted, once it ended; -1 if
  // none was.
  int64_t Received() {
    int64_t received = -1;
    // Unblocks a listener still waiting in accept.
    if (const int poke = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); poke >= 0) {
      sockaddr_un address = {};
      address.sun_family = AF_UNIX;
      std::memcpy(address.sun_path + 1, address_.data() + 1, address_.size() - 1);
      (void)connect(poke, reinterpret_cast<sockaddr*>(&address),
                    static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size()));
      close(poke);
    }
    if (read(report_[0], &received, sizeof received) != sizeof received) return -1;
    return received;
  }

 private:
  std::string address_;
  pid_t child_ = -1;
  int report_[2] = {-1, -1};
  bool listening_ = false;
};

// Anyone may listen on any free abstract name, and name it wherever they
// may set an attribute: the client talks only to a listener run by the
// mount's owner or root, and sends nothing to another.
TEST(ConnectToTest, AListenerOfAnotherUserIsRefusedAndSentNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "listening as another user needs root";
  Listener listener(65534);
  ASSERT_TRUE(listener.listening());
  int connection = -1;
  EXPECT_EQ(ConnectTo(listener.address(), /*owner=*/1000, &connection), -EPERM);
  EXPECT_EQ(connection, -1);
  EXPECT_EQ(std::string(LastError()),
            listener.address() +
                " is served by uid 65534, not by the mount's owner (uid 1000) "
                "or root: not its daemon, so nothing was sent");
  EXPECT_EQ(listener.Received(), 0);
}

TEST(ConnectToTest, TheOwnersListenerIsReachedAndItsRepliesAwaitedBoundedly) {
  const uid_t owner = geteuid() == 0 ? 65534 : geteuid();
  Listener listener(owner);
  ASSERT_TRUE(listener.listening());
  int connection = -1;
  ASSERT_EQ(ConnectTo(listener.address(), owner, &connection), 0) << LastError();
  timeval bound = {};
  socklen_t length = sizeof bound;
  ASSERT_EQ(getsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &bound, &length), 0);
  EXPECT_EQ(bound.tv_sec, ReplyBoundSeconds(0));
  const ShareRequest request = {kMagic, kShareMap, 0, 0, 0, {}};
  ASSERT_EQ(write(connection, &request, sizeof request), static_cast<ssize_t>(sizeof request));
  close(connection);
  EXPECT_EQ(listener.Received(), static_cast<int64_t>(sizeof request));
}

TEST(ConnectToTest, WhatIsNoAbstractAddressIsExdev) {
  int connection = -1;
  for (const char* address : {"", "@", "/run/cudafs.sock"}) {
    EXPECT_EQ(ConnectTo(address, 0, &connection), -EXDEV) << address;
  }
  EXPECT_EQ(connection, -1);
}

}  // namespace
}  // namespace cudafs::client
