// The share server (fs/share/share_server.h) without mounting: a server
// over a Filesystem on host memory, spoken to over its socket by hand.
// What a peer can do to it: stay silent, send slowly, send descriptors
// whose close never returns, speak another version, hold connections, and
// run the daemon out of descriptors. Maps of real files are the mount
// tests' (tests/mount/mount_share_test.cc).
#include "fs/share/share_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "gtest/gtest.h"
#include "tests/support/raw_share_client.h"

namespace cudafs {
namespace {

using cudafs_test::ConnectToShare;
using cudafs_test::MakeShareRequest;
using cudafs_test::ReceiveReply;
using cudafs_test::SendRaw;

constexpr uid_t kNobody = 65534;

class ShareServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ShareSettings{}); }

  void Start(ShareSettings settings) {
    server_.reset();
    if (!device_) {
      device_ = *HostDevice::Create(64 * kMiB);
      arena_ = std::make_unique<Arena>(device_.get(), 4096);
      filesystem_ = std::make_unique<Filesystem>(arena_.get(), FilesystemConfig{});
    }
    settings.mount_device = makedev(0, 0);  // no descriptor is of this "mount"
    absl::StatusOr<std::unique_ptr<ShareServer>> server =
        ShareServer::Start(filesystem_.get(), std::move(settings));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // A request with no descriptor: the whole path, worker included, ending
  // in EBADF. The answer's errno, or -1 when none came within `timeout`.
  int Ask(absl::Duration timeout = absl::Seconds(5)) {
    const int connection = ConnectToShare(server_->address());
    if (connection < 0) return -2;
    const ShareRequest request = MakeShareRequest(kShareMap);
    SendRaw(connection, &request, sizeof request);
    ShareReply reply;
    const bool answered =
        ReceiveReply(connection, &reply, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    close(connection);
    return answered ? reply.error : -1;
  }

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> filesystem_;
  std::unique_ptr<ShareServer> server_;
};

// Runs `body` in a child process as `uid`; returns once the child has
// written a byte to the pipe (it then waits until killed). Returns the pid.
pid_t RunAsUntilKilled(uid_t uid, const std::function<void()>& body) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (setgid(uid) != 0 || setuid(uid) != 0) _exit(1);
    body();
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char byte;
  (void)!read(ready[0], &byte, 1);
  close(ready[0]);
  return pid;
}

void Kill(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST_F(ShareServerTest, AnsweredWithoutAMount) { EXPECT_EQ(Ask(), EBADF); }

// The attack: another user opens many connections and sends nothing. The
// owner's requests are answered at once all the same.
TEST_F(ShareServerTest, SilentPeersStallNoOne) {
  ShareSettings settings;
  settings.allow_other = true;
  Start(settings);
  const std::string address = server_->address();
  const pid_t attacker = RunAsUntilKilled(kNobody, [&] {
    for (int i = 0; i < 40; ++i) (void)ConnectToShare(address);  // held open, silent
  });
  ASSERT_GT(attacker, 0);
  for (int i = 0; i < 20; ++i) {
    const absl::Time start = absl::Now();
    EXPECT_EQ(Ask(absl::Seconds(1)), EBADF) << "request " << i;
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  }
  Kill(attacker);
}

// A peer sending a byte at a time holds no worker either.
TEST_F(ShareServerTest, SlowPeersStallNoOne) {
  std::vector<int> slow;
  for (int i = 0; i < ShareServer::kWorkers + 2; ++i) {
    slow.push_back(ConnectToShare(server_->address()));
    const ShareRequest request = MakeShareRequest(kShareMap);
    ASSERT_TRUE(SendRaw(slow.back(), &request, 5));
  }
  EXPECT_EQ(Ask(absl::Seconds(1)), EBADF);
  for (int connection : slow) close(connection);
}

// Connections a user holds are bounded; past the bound the user hears
// EAGAIN at once, and silent ones end at the request deadline.
TEST_F(ShareServerTest, ConnectionsPerUserAreBoundedAndExpire) {
  std::vector<int> held;
  for (int i = 0; i < ShareServer::kMaxPerUser; ++i) {
    held.push_back(ConnectToShare(server_->address()));
  }
  absl::SleepFor(absl::Milliseconds(100));  // accepted
  const int refused = ConnectToShare(server_->address());
  ShareReply reply;
  ASSERT_TRUE(ReceiveReply(refused, &reply, 1000));
  EXPECT_EQ(reply.error, EAGAIN);
  EXPECT_NE(std::string(reply.message).find("too many"), std::string::npos) << reply.message;
  close(refused);
  // The silent ones are dropped at the deadline; then the user is let in.
  for (int connection : held) {
    char byte;
    pollfd ended = {connection, POLLIN, 0};
    ASSERT_EQ(poll(&ended, 1, static_cast<int>(absl::ToInt64Milliseconds(
                                  ShareServer::kRequestDeadline + absl::Seconds(2)))),
              1);
    EXPECT_EQ(read(connection, &byte, 1), 0);
    close(connection);
  }
  EXPECT_EQ(Ask(), EBADF);
}

// A peer the mount does not let in is refused before it sends a byte.
TEST_F(ShareServerTest, PeersNotLetInAreRefusedAtOnce) {
  ShareSettings settings;
  settings.owner = 4321;  // not us (root), and no allow_root
  Start(settings);
  const int connection = ConnectToShare(server_->address());
  ShareReply reply;
  ASSERT_TRUE(ReceiveReply(connection, &reply, 1000));
  EXPECT_EQ(reply.error, EACCES);
  close(connection);
  settings.allow_root = true;
  Start(settings);
  EXPECT_EQ(Ask(), EBADF);
}

// A descriptor whose close blocks (here a TCP socket lingering over data
// its peer never reads; on a real system, a file of a FUSE filesystem
// whose server never answers FLUSH) stalls no worker, nor the server's
// end.
TEST_F(ShareServerTest, DescriptorsWhoseCloseBlocksStallNoOne) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 16), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::vector<int> never_read;
  for (int i = 0; i < ShareServer::kWorkers; ++i) {
    const int lingering = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    connect(lingering, reinterpret_cast<sockaddr*>(&address), sizeof address);
    pollfd connected = {lingering, POLLOUT, 0};
    ASSERT_EQ(poll(&connected, 1, 1000), 1);
    never_read.push_back(accept(listener, nullptr, nullptr));
    const std::string chunk(65536, 'x');
    while (write(lingering, chunk.data(), chunk.size()) > 0) {
    }
    const linger wait = {1, 30};
    ASSERT_EQ(setsockopt(lingering, SOL_SOCKET, SO_LINGER, &wait, sizeof wait), 0);
    const int connection = ConnectToShare(server_->address());
    const ShareRequest request = MakeShareRequest(kShareMap);
    ASSERT_TRUE(SendRaw(connection, &request, sizeof request, lingering));
    close(lingering);  // the server's copy is now the last
    ShareReply reply;
    ASSERT_TRUE(ReceiveReply(connection, &reply, 2000)) << i;
    EXPECT_EQ(reply.error, EXDEV);
    close(connection);
  }
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Ask(absl::Seconds(1)), EBADF);
  const absl::Time start = absl::Now();
  server_.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (int peer : never_read) close(peer);  // the lingering closes end
  close(listener);
}

TEST_F(ShareServerTest, MalformedRequestsAreRefusedInWords) {
  struct Case {
    ShareRequest request;
    int error;
  };
  ShareRequest flags = MakeShareRequest(kShareMap, 0x80);
  ShareRequest reserved = MakeShareRequest(kShareMap);
  reserved.reserved = 1;
  ShareRequest unknown = MakeShareRequest(99);
  ShareRequest out_of_turn = MakeShareRequest(kShareFill);
  ShareRequest memory = MakeShareRequest(kShareSync);
  memory.memory_bytes = 4096;
  ShareRequest garbage = MakeShareRequest(kShareMap);
  garbage.magic = 0x12345678;
  for (const Case& c : {Case{flags, EINVAL}, Case{reserved, EINVAL}, Case{unknown, EINVAL},
                        Case{out_of_turn, EPROTO}, Case{memory, EINVAL}, Case{garbage, EPROTO}}) {
    const int connection = ConnectToShare(server_->address());
    ASSERT_TRUE(SendRaw(connection, &c.request, sizeof c.request));
    ShareReply reply;
    ASSERT_TRUE(ReceiveReply(connection, &reply, 2000));
    EXPECT_EQ(reply.error, c.error) << reply.message;
    EXPECT_NE(reply.message[0], '\0');
    close(connection);
  }
}

// A client of protocol 3 (16-byte requests) hears, in its own framing,
// which version the daemon speaks.
TEST_F(ShareServerTest, OtherVersionsAreToldWhichOneIsSpoken) {
  const uint32_t old_request[4] = {ShareMagic(3), kShareMap, 0, 0};
  const int connection = ConnectToShare(server_->address());
  ASSERT_TRUE(SendRaw(connection, old_request, sizeof old_request));
  ShareReply reply;
  ASSERT_TRUE(ReceiveReply(connection, &reply, 2000));
  EXPECT_EQ(reply.magic, ShareMagic(3));
  EXPECT_EQ(reply.error, EPROTONOSUPPORT);
  EXPECT_NE(std::string(reply.message).find("protocol 4"), std::string::npos) << reply.message;
  close(connection);
}

// Out of descriptors, the request that needed one fails in words; the
// rest of the server keeps working.
TEST_F(ShareServerTest, RunningOutOfDescriptorsFailsOneRequest) {
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int connection = ConnectToShare(server_->address());
  absl::SleepFor(absl::Milliseconds(100));  // accepted
  // Fill the table up to a lowered limit, leaving none for the server.
  rlimit low = saved;
  low.rlim_cur = 512;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd = open("/dev/null", O_RDONLY); fd >= 0; fd = open("/dev/null", O_RDONLY)) {
    filler.push_back(fd);
  }
  ASSERT_FALSE(filler.empty());
  const int spare_for_us = filler.back();
  filler.pop_back();
  close(spare_for_us);
  const int passed = open("/dev/null", O_RDONLY);  // the one we send
  const ShareRequest request = MakeShareRequest(kShareMap);
  ASSERT_TRUE(SendRaw(connection, &request, sizeof request, passed));
  ShareReply reply;
  const bool answered = ReceiveReply(connection, &reply, 2000);
  close(passed);
  for (int fd : filler) close(fd);
  ASSERT_TRUE(answered);
  EXPECT_EQ(reply.error, EMFILE) << reply.message;
  close(connection);
  EXPECT_EQ(Ask(), EBADF);
  setrlimit(RLIMIT_NOFILE, &saved);
}

}  // namespace
}  // namespace cudafs
