// MessageWriter (fs/share/message_writer.h) over a non-blocking socketpair
// whose reader takes its time: every byte arrives once and in order, each
// message's descriptors with its first byte, however often the socket is
// full.
#include "fs/share/message_writer.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fs/wire/descriptor_socket.h"
#include "gtest/gtest.h"

namespace cudafs {
namespace {

using Progress = MessageWriter::Progress;

class ShareMessageWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends_), 0);
    const int small = 4096;  // the kernel doubles it and keeps a minimum
    ASSERT_EQ(setsockopt(ends_[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  }
  void TearDown() override {
    for (int end : ends_) {
      if (end >= 0) close(end);
    }
  }
  int ends_[2] = {-1, -1};
};

ino_t InodeOf(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

TEST_F(ShareMessageWriterTest, EveryByteOnceInOrderWithItsDescriptors) {
  // Three messages larger than the socket holds, each with a descriptor
  // of a file of its own.
  std::vector<ShareMessage> messages;
  std::vector<int> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back(open(i == 1 ? "/proc/self/exe" : "/dev/null", O_RDONLY | O_CLOEXEC));
    messages.push_back({std::string(100'000, static_cast<char>('a' + i)), {files.back()}});
  }
  messages.push_back({"last, no descriptor", {}});
  MessageWriter writer;
  std::string received;
  struct Arrival {
    size_t from, to;  // the bytes of the read it came with
    int fd;
  };
  std::vector<Arrival> descriptors;
  int blocked = 0;
  for (Progress progress = Progress::kBlocked;;) {
    if (progress != Progress::kDone) {
      progress = writer.WriteTo(ends_[0], messages);
      ASSERT_NE(progress, Progress::kBroken);
      if (progress == Progress::kBlocked) ++blocked;
    }
    // Read a little, as a slow client would.
    char chunk[3000];
    std::vector<int> fds;
    bool refused = false;
    const ssize_t got =
        ReceiveWithDescriptors(ends_[1], chunk, sizeof chunk, MSG_DONTWAIT, 8, &fds, &refused);
    ASSERT_FALSE(refused);
    if (got > 0) {
      for (int fd : fds) {
        descriptors.push_back({received.size(), received.size() + static_cast<size_t>(got), fd});
      }
      received.append(chunk, static_cast<size_t>(got));
    }
    if (progress == Progress::kDone && got <= 0) break;
  }
  EXPECT_GT(blocked, 10);
  std::string expected;
  for (const ShareMessage& message : messages) expected += message.bytes;
  ASSERT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected);
  ASSERT_EQ(descriptors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    // A read returns the bytes before a message's with them, never later.
    EXPECT_LE(descriptors[i].from, i * 100'000) << "message " << i;
    EXPECT_GT(descriptors[i].to, i * 100'000) << "message " << i;
    EXPECT_EQ(InodeOf(descriptors[i].fd), InodeOf(files[i]));
    close(descriptors[i].fd);
  }
  for (int fd : files) close(fd);
}

TEST_F(ShareMessageWriterTest, DoneStartsOverAndRestartForgetsWhereItWas) {
  const std::vector<ShareMessage> one = {{"one", {}}};
  MessageWriter writer;
  ASSERT_EQ(writer.WriteTo(ends_[0], one), Progress::kDone);
  ASSERT_EQ(writer.WriteTo(ends_[0], one), Progress::kDone);  // from its start again
  char buffer[16];
  ASSERT_EQ(read(ends_[1], buffer, sizeof buffer), 6);
  EXPECT_EQ(std::string(buffer, 6), "oneone");
  // Blocked halfway through a long message, then told to start over.
  const std::vector<ShareMessage> longer = {{std::string(1 << 20, 'x'), {}}};
  ASSERT_EQ(writer.WriteTo(ends_[0], longer), Progress::kBlocked);
  while (read(ends_[1], buffer, sizeof buffer) > 0) {
  }
  writer.Restart();
  const std::vector<ShareMessage> two = {{"two", {}}};
  ASSERT_EQ(writer.WriteTo(ends_[0], two), Progress::kDone);
  ASSERT_EQ(read(ends_[1], buffer, sizeof buffer), 3);
  EXPECT_EQ(std::string(buffer, 3), "two");
}

TEST_F(ShareMessageWriterTest, APeerGoneIsBroken) {
  close(ends_[1]);
  ends_[1] = -1;
  MessageWriter writer;
  EXPECT_EQ(writer.WriteTo(ends_[0], {{"anyone?", {}}}), Progress::kBroken);
}

}  // namespace
}  // namespace cudafs
