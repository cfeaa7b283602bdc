// The share server (fs/share/share_server.h) without mounting: a server
// over a Filesystem on host memory, spoken to over its socket by hand.
// What a peer can do to it: stay silent, send slowly, send descriptors
// whose close never returns, speak another version, hold connections, and
// run the daemon out of descriptors. Maps of real files are the mount
// tests' (tests/mount/mount_share_test.cc).
#include "fs/share/share_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "alloc/base/errors.h"
#include "alloc/devices/host_device.h"
#include "alloc/storage/arena.h"
#include "gtest/gtest.h"
#include "tests/support/errno_check.h"
#include "tests/support/eventually.h"
#include "tests/support/lingering_sockets.h"
#include "tests/support/processes.h"
#include "tests/support/raw_share_client.h"

namespace cudafs {
namespace {

using cudafs_test::ConnectToShare;
using cudafs_test::Errno;
using cudafs_test::Eventually;
using cudafs_test::LingeringSockets;
using cudafs_test::MakeShareRequest;
using cudafs_test::ReceiveReply;
using cudafs_test::RunAs;
using cudafs_test::StartAs;
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

  // Requests are answered within `within`, and the server ends within 5 s.
  void ExpectNoStall(absl::Duration within) {
    for (int i = 0; i < 10; ++i) {
      const absl::Time start = absl::Now();
      EXPECT_EQ(Ask(absl::Seconds(2)), EBADF) << "request " << i;
      EXPECT_LT(absl::Now() - start, within) << "request " << i;
    }
    const absl::Time start = absl::Now();
    server_.reset();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }

  std::unique_ptr<HostDevice> device_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Filesystem> filesystem_;
  std::unique_ptr<ShareServer> server_;
};

// A RoomMaker that records what it was asked and answers `answer`, after
// `release` is notified when one is set.
class RecordingRoomMaker final : public RoomMaker {
 public:
  absl::Status MakeRoom(const Request& request, uid_t caller) override {
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back({request, caller});
    }
    if (!started_.HasBeenNotified()) started_.Notify();
    if (release_ != nullptr) release_->WaitForNotification();
    return answer_;
  }

  struct Asked {
    Request request;
    uid_t caller;
  };
  std::vector<Asked> asked() const {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

  absl::Status answer_ = absl::OkStatus();
  absl::Notification* release_ = nullptr;
  absl::Notification started_;

 private:
  mutable absl::Mutex mu_;
  std::vector<Asked> asked_ ABSL_GUARDED_BY(mu_);
};

// A make-room request over `connection`: its answer's errno and message,
// or -1 when none came within `timeout_ms`.
std::pair<int, std::string> AskForRoom(int connection, const ShareRequest& request,
                                       int timeout_ms = 5000, int fd = -1) {
  if (!SendRaw(connection, &request, sizeof request, fd)) return {-2, ""};
  ShareReply reply;
  if (!ReceiveReply(connection, &reply, timeout_ms)) return {-1, ""};
  return {reply.error, reply.message};
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
  const pid_t attacker = StartAs(kNobody, kNobody, [&] {
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

// A descriptor whose close blocks, sent with a request: refused as it
// comes (no request takes a socket), and its close stalls no worker, nor
// the server's end.
TEST_F(ShareServerTest, DescriptorsWhoseCloseBlocksStallNoOne) {
  LingeringSockets sockets;
  for (int i = 0; i < ShareServer::kWorkers; ++i) {
    const int lingering = sockets.Make(30);
    ASSERT_GE(lingering, 0);
    const int connection = ConnectToShare(server_->address());
    const ShareRequest request = MakeShareRequest(kShareMap);
    ASSERT_TRUE(SendRaw(connection, &request, sizeof request, lingering));
    close(lingering);  // the server's copy is now the last
    ShareReply reply;
    ASSERT_TRUE(ReceiveReply(connection, &reply, 2000)) << i;
    EXPECT_EQ(reply.error, EBADF) << reply.message;
    close(connection);
  }
  ExpectNoStall(absl::Milliseconds(500));
}

// More descriptors than a request carries, all the last references to a
// lingering socket: the excess is refused, and closed off the
// connections' thread.
TEST_F(ShareServerTest, ExcessDescriptorsAreClosedOffTheConnectionsThread) {
  LingeringSockets sockets;
  const int lingering = sockets.Make(30);
  ASSERT_GE(lingering, 0);
  // One message with one descriptor more than a request carries (and
  // more than the library's SendWithDescriptors sends).
  const std::vector<int> copies(kShareBatch + 1, lingering);
  const int connection = ConnectToShare(server_->address());
  const ShareRequest request = MakeShareRequest(kShareFill);
  ASSERT_EQ(cudafs_test::SendWithAnyDescriptors(connection, &request, sizeof request, copies),
            static_cast<ssize_t>(sizeof request));
  close(lingering);
  ShareReply reply;
  ASSERT_TRUE(ReceiveReply(connection, &reply, 2000));
  EXPECT_EQ(reply.error, EMFILE) << reply.message;
  close(connection);
  // The copies close on our lane, all but the last at once; until then
  // they count against us, their sender, as more than 16 connections.
  EXPECT_TRUE(Eventually([&] { return server_->stats().closing <= 1; }, std::chrono::seconds(5)));
  ExpectNoStall(absl::Milliseconds(500));
}

// A connection ended with a message still unread that carries a
// lingering socket: closing the connection releases it, off the
// connections' thread.
TEST_F(ShareServerTest, UnreadDescriptorsOfAnEndedConnectionStallNoOne) {
  LingeringSockets sockets;
  int left_unread = 0;
  for (int attempt = 0; attempt < 20 && left_unread < 3; ++attempt) {
    const int lingering = sockets.Make(30);
    ASSERT_GE(lingering, 0);
    const int connection = ConnectToShare(server_->address());
    // A whole request (refused: no descriptor), then a message the server
    // never reads, with the socket: unless the server has already answered
    // and shut the connection (EPIPE), which a loaded machine may do.
    const ShareRequest request = MakeShareRequest(kShareMap);
    const char extra = 'x';
    ASSERT_TRUE(SendRaw(connection, &request, sizeof request));
    if (SendWithDescriptors(connection, &extra, 1, &lingering, 1, 0) == 1) {
      ++left_unread;
      close(lingering);
    } else {
      LingeringSockets::CloseAtOnce(lingering);
    }
    ShareReply reply;
    ASSERT_TRUE(ReceiveReply(connection, &reply, 2000)) << attempt;
    EXPECT_EQ(reply.error, EBADF) << reply.message;
    close(connection);
  }
  ASSERT_GT(left_unread, 0) << "the server shut every connection before the second message";
  absl::SleepFor(absl::Milliseconds(200));  // the connections dropped
  EXPECT_GE(server_->stats().closing, 1u);
  ExpectNoStall(absl::Milliseconds(500));
}

// Other users holding every connection they may still leave some for the
// owner (and root), whose maps go on.
TEST_F(ShareServerTest, SomeConnectionsAreKeptForTheOwner) {
  ShareSettings settings;
  settings.allow_other = true;
  Start(settings);
  const std::string address = server_->address();
  const size_t others = ShareServer::kMaxConnections - ShareServer::kReservedForOwner;
  std::vector<pid_t> attackers;
  for (size_t held = 0; held < others; held += ShareServer::kMaxPerUser) {
    const uid_t uid = static_cast<uid_t>(20000 + attackers.size());
    attackers.push_back(StartAs(uid, uid, [&] {
      for (int i = 0; i < ShareServer::kMaxPerUser; ++i) (void)ConnectToShare(address);
    }));
  }
  absl::SleepFor(absl::Milliseconds(100));  // accepted
  // One more user is turned away; the owner is not.
  const Errno late = RunAs(30000, 30000, [&] {
    const int connection = ConnectToShare(address);
    ShareReply reply;
    return Errno{ReceiveReply(connection, &reply, 1000) ? reply.error : 254};
  });
  EXPECT_EQ(late, Errno{EAGAIN}) << "another user was let in";
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Ask(absl::Seconds(1)), EBADF) << "request " << i;
  for (pid_t attacker : attackers) Kill(attacker);
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
  EXPECT_NE(std::string(reply.message).find("protocol 5"), std::string::npos) << reply.message;
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

namespace cudafs {
namespace {

TEST_F(ShareServerTest, MakeRoomIsHandedToTheRoomMakerWithTheCaller) {
  RecordingRoomMaker room;
  ShareSettings settings;
  settings.room_maker = &room;
  Start(settings);
  ShareRequest request = MakeShareRequest(kShareMakeRoom);
  request.memory_bytes = uint64_t{3} << 30;
  std::strcpy(request.gpu, "0000:65:00.0");
  int connection = ConnectToShare(server_->address());
  EXPECT_EQ(AskForRoom(connection, request).first, 0);
  close(connection);
  // All, held, on every GPU; refused in the maker's words.
  room.answer_ = PosixError(ENOSPC, "host memory (spill=) is full");
  request = MakeShareRequest(kShareMakeRoom, kShareRoomAll | kShareRoomHold);
  connection = ConnectToShare(server_->address());
  const auto [error, message] = AskForRoom(connection, request);
  close(connection);
  EXPECT_EQ(error, ENOSPC);
  EXPECT_EQ(message.rfind("host memory (spill=) is full", 0), 0u) << message;
  const std::vector<RecordingRoomMaker::Asked> asked = room.asked();
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].request.bytes, std::optional<uint64_t>(uint64_t{3} << 30));
  EXPECT_EQ(asked[0].request.gpu, "0000:65:00.0");
  EXPECT_FALSE(asked[0].request.hold);
  EXPECT_EQ(asked[0].caller, getuid());
  EXPECT_EQ(asked[1].request.bytes, std::nullopt);
  EXPECT_EQ(asked[1].request.gpu, "");
  EXPECT_TRUE(asked[1].request.hold);
  EXPECT_EQ(server_->stats().requests.rooms, 1u);
}

TEST_F(ShareServerTest, MalformedMakeRoomRequestsReachNoRoomMaker) {
  RecordingRoomMaker room;
  ShareSettings settings;
  settings.room_maker = &room;
  Start(settings);
  ShareRequest all_and_bytes = MakeShareRequest(kShareMakeRoom, kShareRoomAll);
  all_and_bytes.memory_bytes = 1;
  ShareRequest map_flag = MakeShareRequest(kShareMakeRoom, kShareWritable);
  ShareRequest unterminated = MakeShareRequest(kShareMakeRoom);
  std::memset(unterminated.gpu, 'a', sizeof unterminated.gpu);
  ShareRequest map_with_gpu = MakeShareRequest(kShareMap);
  std::strcpy(map_with_gpu.gpu, "0000:65:00.0");
  ShareRequest map_with_room_flag = MakeShareRequest(kShareMap, kShareRoomAll);
  for (const ShareRequest& request :
       {all_and_bytes, map_flag, unterminated, map_with_gpu, map_with_room_flag}) {
    const int connection = ConnectToShare(server_->address());
    const auto [error, message] = AskForRoom(connection, request);
    EXPECT_EQ(error, EINVAL) << message;
    close(connection);
  }
  // A descriptor sent with it is refused too.
  const int connection = ConnectToShare(server_->address());
  const int memfd = memfd_create("room-test", MFD_CLOEXEC);
  EXPECT_EQ(AskForRoom(connection, MakeShareRequest(kShareMakeRoom), 5000, memfd).first, EINVAL);
  close(memfd);
  close(connection);
  EXPECT_TRUE(room.asked().empty());
}

TEST_F(ShareServerTest, WithoutARoomMakerMakeRoomIsNotSupported) {
  const int connection = ConnectToShare(server_->address());
  const auto [error, message] = AskForRoom(connection, MakeShareRequest(kShareMakeRoom));
  EXPECT_EQ(error, EOPNOTSUPP) << message;
  close(connection);
}

// Making room takes seconds: meanwhile the other requests are answered.
TEST_F(ShareServerTest, AMakeRoomUnderWayStallsNoOtherRequest) {
  RecordingRoomMaker room;
  absl::Notification release;
  room.release_ = &release;
  ShareSettings settings;
  settings.room_maker = &room;
  Start(settings);
  const int waiting = ConnectToShare(server_->address());
  ShareRequest request = MakeShareRequest(kShareMakeRoom);
  request.memory_bytes = 1;
  ASSERT_TRUE(SendRaw(waiting, &request, sizeof request));
  room.started_.WaitForNotification();
  for (int i = 0; i < 2 * ShareServer::kWorkers; ++i) {
    const absl::Time start = absl::Now();
    EXPECT_EQ(Ask(absl::Seconds(2)), EBADF);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
  // Held past the request deadline, the connection still gets its answer.
  absl::SleepFor(ShareServer::kRequestDeadline + absl::Milliseconds(500));
  release.Notify();
  ShareReply reply;
  ASSERT_TRUE(ReceiveReply(waiting, &reply, 5000));
  EXPECT_EQ(reply.error, 0) << reply.message;
  close(waiting);
}

}  // namespace
}  // namespace cudafs
