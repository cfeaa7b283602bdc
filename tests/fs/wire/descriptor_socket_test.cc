// Messages with descriptors (fs/wire/descriptor_socket.h) over a
// socketpair: what arrives, and what a hostile peer can make of the
// receiver (too many descriptors, short messages, a closed end) without
// leaking a descriptor, hanging or killing it.
#include "fs/wire/descriptor_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/open_descriptors.h"
#include "tests/support/raw_share_client.h"

namespace cudafs {
namespace {

// Descriptors open in this process.
using cudafs_test::OpenDescriptors;

bool SameFile(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

class WireDescriptorSocketTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends_), 0); }
  void TearDown() override {
    for (int end : ends_) {
      if (end >= 0) close(end);
    }
  }
  void CloseSender() {
    close(ends_[0]);
    ends_[0] = -1;
  }
  // Files to send: `n` descriptors of /dev/null; the caller closes them.
  static std::vector<int> Files(size_t n) {
    std::vector<int> fds;
    for (size_t i = 0; i < n; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
    return fds;
  }
  static void CloseAll(const std::vector<int>& fds) {
    for (int fd : fds) close(fd);
  }

  int sender() const { return ends_[0]; }
  int receiver() const { return ends_[1]; }

  int ends_[2] = {-1, -1};
};

TEST_F(WireDescriptorSocketTest, BytesAndDescriptorsArriveTogether) {
  const int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const std::string message = "twelve bytes";
  ASSERT_EQ(SendWithDescriptors(sender(), message.data(), message.size(), &file, 1, 0),
            static_cast<ssize_t>(message.size()));
  char buffer[64] = {};
  std::vector<int> fds;
  bool refused = false;
  ASSERT_EQ(
      ReceiveWithDescriptors(receiver(), buffer, message.size(), MSG_WAITALL, 1, &fds, &refused),
      static_cast<ssize_t>(message.size()));
  EXPECT_FALSE(refused);
  EXPECT_EQ(std::string(buffer), message);
  ASSERT_EQ(fds.size(), 1u);
  EXPECT_NE(fds[0], file);
  EXPECT_TRUE(SameFile(fds[0], file));
  EXPECT_EQ(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  close(fds[0]);
  close(file);
}

TEST_F(WireDescriptorSocketTest, AFullBatchArrivesInOrder) {
  std::vector<int> sent;
  for (size_t i = 0; i < kMaxDescriptorsPerMessage; ++i) {
    // Distinct files, so that order shows: every other one the binary.
    sent.push_back(open(i % 2 ? "/proc/self/exe" : "/dev/null", O_RDONLY | O_CLOEXEC));
  }
  const char byte = 'x';
  ASSERT_EQ(SendWithDescriptors(sender(), &byte, 1, sent.data(), sent.size(), 0), 1);
  char got;
  std::vector<int> fds = {-7};  // appended to, not replaced
  bool refused = false;
  ASSERT_EQ(
      ReceiveWithDescriptors(receiver(), &got, 1, 0, 1 + kMaxDescriptorsPerMessage, &fds, &refused),
      1);
  EXPECT_FALSE(refused);
  ASSERT_EQ(fds.size(), 1 + kMaxDescriptorsPerMessage);
  EXPECT_EQ(fds[0], -7);
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_TRUE(SameFile(fds[1 + i], sent[i])) << i;
  CloseAll(sent);
  CloseAll(std::vector<int>(fds.begin() + 1, fds.end()));
}

// A stream socket keeps each message's descriptors with its bytes: a
// receiver reading one message's length gets that message's alone.
TEST_F(WireDescriptorSocketTest, EachMessageKeepsItsOwnDescriptors) {
  const std::vector<int> first = Files(2);
  const std::vector<int> second = Files(3);
  ASSERT_EQ(SendWithDescriptors(sender(), "aaaa", 4, first.data(), first.size(), 0), 4);
  ASSERT_EQ(SendWithDescriptors(sender(), "bbbb", 4, second.data(), second.size(), 0), 4);
  char buffer[4];
  std::vector<int> fds;
  bool refused = false;
  ASSERT_EQ(ReceiveWithDescriptors(receiver(), buffer, 4, MSG_WAITALL, 8, &fds, &refused), 4);
  EXPECT_EQ(fds.size(), 2u);
  EXPECT_EQ(std::string(buffer, 4), "aaaa");
  ASSERT_EQ(ReceiveWithDescriptors(receiver(), buffer, 4, MSG_WAITALL, 8, &fds, &refused), 4);
  EXPECT_EQ(fds.size(), 5u);
  EXPECT_EQ(std::string(buffer, 4), "bbbb");
  EXPECT_FALSE(refused);
  CloseAll(first);
  CloseAll(second);
  CloseAll(fds);
}

TEST_F(WireDescriptorSocketTest, MoreThanOneMessageCarriesIsNotSent) {
  const std::vector<int> many = Files(kMaxDescriptorsPerMessage + 1);
  errno = 0;
  EXPECT_EQ(SendWithDescriptors(sender(), "x", 1, many.data(), many.size(), 0), -1);
  EXPECT_EQ(errno, EINVAL);
  char byte;
  EXPECT_EQ(recv(receiver(), &byte, 1, MSG_DONTWAIT), -1);  // nothing went
  EXPECT_EQ(errno, EAGAIN);
  CloseAll(many);
}

// More descriptors than the receiver takes: it is told, and keeps none
// of them (those it already held stay).
TEST_F(WireDescriptorSocketTest, DescriptorsPastTheLimitAreRefusedAndClosed) {
  const std::vector<int> sent = Files(5);
  std::vector<int> held = Files(2);
  const int before = OpenDescriptors();
  ASSERT_EQ(SendWithDescriptors(sender(), "x", 1, sent.data(), sent.size(), 0), 1);
  CloseAll(sent);
  char byte;
  bool refused = false;
  EXPECT_EQ(ReceiveWithDescriptors(receiver(), &byte, 1, 0, /*max=*/6, &held, &refused), 1);
  EXPECT_TRUE(refused);
  EXPECT_EQ(held.size(), 2u);
  EXPECT_EQ(OpenDescriptors(), before - 5);
  CloseAll(held);
}

TEST_F(WireDescriptorSocketTest, DescriptorsWhereNoneAreTakenAreRefused) {
  const std::vector<int> sent = Files(1);
  const int before = OpenDescriptors();
  ASSERT_EQ(SendWithDescriptors(sender(), "x", 1, sent.data(), 1, 0), 1);
  char byte;
  std::vector<int> fds;
  bool refused = false;
  EXPECT_EQ(ReceiveWithDescriptors(receiver(), &byte, 1, 0, 0, &fds, &refused), 1);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(fds.empty());
  EXPECT_EQ(OpenDescriptors(), before);
  CloseAll(sent);
}

// A peer using sendmsg(2) itself can send up to SCM_MAX_FD descriptors at
// once, more than a receiver asks for: it refuses and keeps none.
TEST_F(WireDescriptorSocketTest, AFloodOfDescriptorsIsRefusedWithoutALeak) {
  constexpr size_t kFlood = 200;
  static_assert(kFlood > kMaxDescriptorsPerMessage);
  const std::vector<int> flood = Files(kFlood);
  char byte = 'x';
  ASSERT_EQ(cudafs_test::SendWithAnyDescriptors(sender(), &byte, 1, flood), 1);
  CloseAll(flood);
  const int before = OpenDescriptors();
  std::vector<int> fds;
  bool refused = false;
  EXPECT_EQ(
      ReceiveWithDescriptors(receiver(), &byte, 1, 0, kMaxDescriptorsPerMessage, &fds, &refused),
      1);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(fds.empty());
  EXPECT_EQ(OpenDescriptors(), before);
}

// A server's receive keeps all the kernel passes at once (SCM_MAX_FD), so
// that the kernel drops, and closes on the server's thread, none.
TEST_F(WireDescriptorSocketTest, AServerKeepsAsManyAsTheKernelPasses) {
  const std::vector<int> most = Files(kMaxDescriptorsTheKernelPasses);
  char byte = 'x';
  ASSERT_EQ(cudafs_test::SendWithAnyDescriptors(sender(), &byte, 1, most), 1);
  CloseAll(most);
  std::vector<int> fds;
  bool truncated = true;
  EXPECT_EQ(ReceiveKeepingDescriptors(receiver(), &byte, 1, 0, &fds, &truncated), 1);
  EXPECT_FALSE(truncated);
  EXPECT_EQ(fds.size(), kMaxDescriptorsTheKernelPasses);
  CloseAll(fds);
}

// A message cut short by a peer that goes away: the receiver gets what
// came and then the end, and does not wait for the rest.
TEST_F(WireDescriptorSocketTest, AShortMessageThenTheEndDoesNotHang) {
  ASSERT_EQ(SendWithDescriptors(sender(), "short", 5, nullptr, 0, 0), 5);
  CloseSender();
  char buffer[64];
  std::vector<int> fds;
  bool refused = false;
  EXPECT_EQ(
      ReceiveWithDescriptors(receiver(), buffer, sizeof buffer, MSG_WAITALL, 0, &fds, &refused), 5);
  EXPECT_EQ(
      ReceiveWithDescriptors(receiver(), buffer, sizeof buffer, MSG_WAITALL, 0, &fds, &refused), 0);
  EXPECT_FALSE(refused);
}

// Bytes past what is asked for stay for the next receive.
TEST_F(WireDescriptorSocketTest, ALongerMessageIsReadNoFurtherThanAsked) {
  ASSERT_EQ(SendWithDescriptors(sender(), "headtail", 8, nullptr, 0, 0), 8);
  char buffer[4];
  std::vector<int> fds;
  bool refused = false;
  ASSERT_EQ(ReceiveWithDescriptors(receiver(), buffer, 4, MSG_WAITALL, 0, &fds, &refused), 4);
  EXPECT_EQ(std::string(buffer, 4), "head");
  ASSERT_EQ(ReceiveWithDescriptors(receiver(), buffer, 4, MSG_WAITALL, 0, &fds, &refused), 4);
  EXPECT_EQ(std::string(buffer, 4), "tail");
}

TEST_F(WireDescriptorSocketTest, NothingYetIsEagainWithoutWaiting) {
  char byte;
  std::vector<int> fds;
  bool refused = false;
  errno = 0;
  EXPECT_EQ(ReceiveWithDescriptors(receiver(), &byte, 1, MSG_DONTWAIT, 0, &fds, &refused), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// Sending to a peer that went away fails with EPIPE rather than raise
// SIGPIPE (which would end the daemon, or the program using the client).
TEST_F(WireDescriptorSocketTest, APeerGoneIsAnErrorNotASignal) {
  close(ends_[1]);
  ends_[1] = -1;
  errno = 0;
  EXPECT_EQ(SendWithDescriptors(sender(), "x", 1, nullptr, 0, 0), -1);
  EXPECT_EQ(errno, EPIPE);
}

}  // namespace
}  // namespace cudafs
