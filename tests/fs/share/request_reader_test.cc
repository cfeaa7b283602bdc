// RequestReader (fs/share/request_reader.h) over a non-blocking
// socketpair, fed by hand as a slow, confused or hostile peer would.
#include "fs/share/request_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fs/wire/descriptor_socket.h"
#include "gtest/gtest.h"
#include "tests/support/open_descriptors.h"

namespace cudafs {
namespace {

using Progress = RequestReader::Progress;

using cudafs_test::OpenDescriptors;

// The mount's device: no descriptor here is of it.
const dev_t kMount = makedev(0, 0);

// A descriptor of a kind requests take.
int Memfd() { return memfd_create("reader-test", MFD_CLOEXEC); }

ShareRequest Request(uint32_t op) { return {ShareMagic(kShareVersion), op, 0, 0, 0, {}}; }

ShareReply ReplyIn(const ShareMessage& message) {
  ShareReply reply = {};
  EXPECT_EQ(message.bytes.size(), sizeof reply);
  std::memcpy(&reply, message.bytes.data(), std::min(message.bytes.size(), sizeof reply));
  return reply;
}

class ShareRequestReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends_), 0);
  }
  void TearDown() override {
    for (int end : ends_) {
      if (end >= 0) close(end);
    }
  }
  // Sends bytes [from, to) of `request`, with `fds`.
  void Send(const ShareRequest& request, size_t from, size_t to, std::vector<int> fds = {}) {
    ASSERT_EQ(SendWithDescriptors(ends_[0], reinterpret_cast<const char*>(&request) + from,
                                  to - from, fds.data(), fds.size(), 0),
              static_cast<ssize_t>(to - from));
  }
  int socket() const { return ends_[1]; }

  int ends_[2] = {-1, -1};
  RequestReader reader_;
};

TEST_F(ShareRequestReaderTest, NothingYetIsPartial) {
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kPartial);
}

TEST_F(ShareRequestReaderTest, ARequestSentAByteAtATimeCompletes) {
  ShareRequest request = Request(kShareFill);
  request.memory_bytes = 1 << 20;
  const int file = Memfd();
  for (size_t i = 0; i < sizeof request; ++i) {
    Send(request, i, i + 1, i == 7 ? std::vector<int>{file} : std::vector<int>{});
    EXPECT_EQ(reader_.ReadFrom(socket(), kMount),
              i + 1 < sizeof request ? Progress::kPartial : Progress::kComplete)
        << i;
  }
  EXPECT_EQ(std::memcmp(&reader_.request(), &request, sizeof request), 0);
  std::vector<int> fds = reader_.TakeDescriptors();
  ASSERT_EQ(fds.size(), 1u);
  EXPECT_TRUE(reader_.TakeDescriptors().empty());
  close(fds[0]);
  close(file);
}

TEST_F(ShareRequestReaderTest, TheNextRequestAfterAReset) {
  Send(Request(kShareMap), 0, sizeof(ShareRequest));
  ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kComplete);
  reader_.Reset();
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kPartial);
  Send(Request(kShareImported), 0, sizeof(ShareRequest));
  ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kComplete);
  EXPECT_EQ(reader_.request().op, kShareImported);
}

TEST_F(ShareRequestReaderTest, APeerGoneMidRequestHasEnded) {
  Send(Request(kShareMap), 0, 10);
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kPartial);
  close(ends_[0]);
  ends_[0] = -1;
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kEnded);
}

// No cudafs magic: refused once four bytes are in, not after a whole
// request's worth.
TEST_F(ShareRequestReaderTest, NoCudafsMagicIsRefusedFromFourBytes) {
  const ShareRequest http = {0x20544547 /* "GET " */, 0, 0, 0, 0, {}};
  Send(http, 0, 2);
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kPartial);
  Send(http, 2, 4);
  ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kRefused);
  const ShareReply reply = ReplyIn(reader_.TakeRefusal());
  EXPECT_EQ(reply.magic, ShareMagic(kShareVersion));
  EXPECT_EQ(reply.error, EPROTO);
  EXPECT_STRNE(reply.message, "");
}

TEST_F(ShareRequestReaderTest, AnotherVersionIsRefusedInItsOwnFraming) {
  ShareRequest old = Request(kShareMap);
  old.magic = ShareMagic(3);
  Send(old, 0, 16);  // version 3's request is 16 bytes
  ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kRefused);
  const ShareReply reply = ReplyIn(reader_.TakeRefusal());
  EXPECT_EQ(reply.magic, ShareMagic(3));
  EXPECT_EQ(reply.error, EPROTONOSUPPORT);
  EXPECT_NE(std::string(reply.message).find("protocol 5"), std::string::npos) << reply.message;
}

// More descriptors than any request carries, sent in two messages: the
// reader refuses as the excess comes, and closes none of them: each is
// the caller's to dispose of (its close may wait).
TEST_F(ShareRequestReaderTest, TooManyDescriptorsAreRefusedAndAllHandedOver) {
  std::vector<int> batch;
  for (size_t i = 0; i < kShareBatch; ++i) batch.push_back(Memfd());
  const int one_more = Memfd();
  const ShareRequest request = Request(kShareFill);
  const int before = OpenDescriptors();
  Send(request, 0, 8, batch);
  EXPECT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kPartial);
  Send(request, 8, 12, {one_more});
  ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kRefused);
  EXPECT_EQ(ReplyIn(reader_.TakeRefusal()).error, EMFILE);
  const std::vector<int> kept = reader_.TakeDescriptors();
  EXPECT_EQ(kept.size(), kShareBatch + 1);
  EXPECT_EQ(OpenDescriptors(), before + static_cast<int>(kShareBatch) + 1);
  for (int fd : kept) close(fd);
  for (int fd : batch) close(fd);
  close(one_more);
}

// A descriptor no request takes (a socket, a pipe, a file of another
// filesystem) is refused as it comes, before the request is whole, and
// handed over with the rest.
TEST_F(ShareRequestReaderTest, DescriptorsOfOtherKindsAreRefusedAsTheyCome) {
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  const int unix_socket = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (const int odd : {pipe_ends[0], unix_socket, null}) {
    SCOPED_TRACE(odd);
    reader_.Reset();
    const int memfd = Memfd();
    Send(Request(kShareFill), 0, 4, {memfd, odd});
    ASSERT_EQ(reader_.ReadFrom(socket(), kMount), Progress::kRefused);
    const ShareReply reply = ReplyIn(reader_.TakeRefusal());
    EXPECT_EQ(reply.error, EBADF);
    EXPECT_NE(std::string(reply.message).find("never takes"), std::string::npos)
        << reply.message;
    const std::vector<int> kept = reader_.TakeDescriptors();
    EXPECT_EQ(kept.size(), 2u);
    for (int fd : kept) close(fd);
    close(memfd);
    // What is left of the request is the next connection's business.
    char rest[sizeof(ShareRequest)];
    (void)!recv(socket(), rest, sizeof rest, MSG_DONTWAIT);
  }
  for (int fd : {pipe_ends[0], pipe_ends[1], unix_socket, null}) close(fd);
}

}  // namespace
}  // namespace cudafs
