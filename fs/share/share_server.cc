#include "fs/share/share_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "fs/share/descriptor_checks.h"
#include "fs/share/message_writer.h"
#include "fs/share/peer_access.h"
#include "fs/share/request_reader.h"
#include "fs/share/share_replies.h"
#include "fs/wire/abstract_address.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs {

struct ShareServer::Connection {
  enum class State { kReading, kWorking, kWriting };

  int socket = -1;
  uid_t uid = 0;
  State state = State::kReading;
  absl::Time deadline;
  // The request being read, and what it may be.
  ShareNext expected = ShareNext::kClose;
  RequestReader reader;
  // The last outcome: its messages being written, what it holds and asks
  // for.
  ShareOutcome outcome;
  MessageWriter writer;
};

absl::StatusOr<std::unique_ptr<ShareServer>> ShareServer::Start(Filesystem* filesystem,
                                                                ShareSettings settings) {
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener < 0) return absl::ErrnoToStatus(errno, "socket");
  std::random_device random;
  const std::string name = absl::StrFormat("cudafs-%d-%08x%08x", getpid(), random(), random());
  const AbstractAddress address = *AbstractAddress::Of(name);  // short: fits
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (wake < 0 || spare < 0 || bind(listener, address.get(), address.length) != 0 ||
      listen(listener, 64) != 0) {
    const int error = errno;
    close(listener);
    if (wake >= 0) close(wake);
    if (spare >= 0) close(spare);
    return absl::ErrnoToStatus(error, "cannot listen on the share socket");
  }
  std::unique_ptr<ShareServer> server(
      new ShareServer(filesystem, std::move(settings), listener, wake, spare, "@" + name));
  server->loop_ = std::thread([raw = server.get()] { raw->Loop(); });
  for (int i = 0; i < kWorkers; ++i) {
    server->workers_.emplace_back([raw = server.get()] { raw->Work(/*rooms=*/false); });
  }
  server->workers_.emplace_back([raw = server.get()] { raw->Work(/*rooms=*/true); });
  return server;
}

ShareServer::Stats ShareServer::stats() const {
  const DescriptorCloser::Stats closes = closer_.stats();
  return {handler_.stats(), closes.closed, closes.pending};
}

ShareServer::ShareServer(Filesystem* filesystem, ShareSettings settings, int listener, int wake,
                         int spare, std::string address)
    : handler_(filesystem, std::move(settings)), listener_(listener), wake_(wake), spare_(spare),
      address_(std::move(address)) {}

ShareServer::~ShareServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  loop_.join();
  for (std::thread& worker : workers_) worker.join();
  // What the workers finished after the loop ended, and jobs never taken.
  absl::MutexLock lock(&mu_);
  for (std::deque<Job>* queue : {&jobs_, &room_jobs_}) {
    for (Job& job : *queue) {
      for (int fd : job.fds) Dispose(fd, job.uid);
    }
    queue->clear();
  }
  done_.clear();
  close(listener_);
  close(wake_);
  close(spare_);
}

void ShareServer::Loop() {
  std::vector<pollfd> polled;
  for (;;) {
    polled.clear();
    polled.push_back({wake_, POLLIN, 0});
    polled.push_back({listener_, POLLIN, 0});
    absl::Time next_deadline = absl::InfiniteFuture();
    for (const auto& [socket, connection] : connections_) {
      short events = 0;
      if (connection->state == Connection::State::kReading) events = POLLIN;
      if (connection->state == Connection::State::kWriting) events = POLLOUT;
      if (events == 0) continue;
      polled.push_back({socket, events, 0});
      next_deadline = std::min(next_deadline, connection->deadline);
    }
    int timeout = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      timeout = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(next_deadline - absl::Now()) + 1, 0, 60'000));
    }
    if (poll(polled.data(), polled.size(), timeout) < 0 && errno != EINTR) {
      LogError(absl::StrCat("share socket: poll: ", std::strerror(errno)));
    }
    // The wake-up is taken before the results, so that one posted after
    // them wakes the next poll.
    uint64_t count;
    (void)!read(wake_, &count, sizeof count);
    std::vector<Done> done;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      done.swap(done_);
    }
    for (Done& finished : done) Finish(std::move(finished));
    if (polled[1].revents & POLLIN) AcceptAll();
    for (size_t i = 2; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      auto it = connections_.find(polled[i].fd);
      if (it == connections_.end()) continue;
      Connection& connection = *it->second;
      if (connection.state == Connection::State::kReading) Read(connection);
      else if (connection.state == Connection::State::kWriting) Write(connection);
    }
    const absl::Time now = absl::Now();
    std::vector<int> expired;
    for (const auto& [socket, connection] : connections_) {
      if (connection->state != Connection::State::kWorking && connection->deadline <= now) {
        expired.push_back(socket);
      }
    }
    for (int socket : expired) Drop(socket);
  }
  std::vector<int> sockets;
  for (const auto& [socket, connection] : connections_) sockets.push_back(socket);
  for (int socket : sockets) Drop(socket, /*stopping=*/true);
}

void ShareServer::AcceptAll() {
  for (;;) {
    int socket = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (socket < 0 && (errno == EMFILE || errno == ENFILE) && spare_ >= 0) {
      // Out of descriptors: the spare one lets this connection in to hear
      // so, rather than leave it queued and the listener ready for ever.
      close(spare_);
      socket = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (socket >= 0) {
        TurnAway(socket, kNobody, EMFILE, "the cudafs daemon is out of file descriptors");
      }
      spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      continue;
    }
    if (socket < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN) LogError(absl::StrCat("share socket: accept: ", std::strerror(errno)));
      return;
    }
    const absl::StatusOr<uid_t> uid = AuthorizePeer(socket, handler_.settings());
    if (!uid.ok()) {
      TurnAway(socket, kNobody, ToErrno(uid.status()), uid.status().message());
      continue;
    }
    // The last kReservedForOwner connections are the owner's and root's:
    // other users, however many, cannot keep them from mapping.
    const bool owner = *uid == 0 || *uid == handler_.settings().owner;
    const size_t limit = owner ? kMaxConnections : kMaxConnections - kReservedForOwner;
    int& held = per_user_[*uid];
    if (connections_.size() >= limit || held + closer_.pending(*uid) >= kMaxPerUser) {
      if (held == 0) per_user_.erase(*uid);
      TurnAway(socket, *uid, EAGAIN, "the cudafs daemon has too many requests at once: try again");
      continue;
    }
    ++held;
    auto connection = std::make_unique<Connection>();
    connection->socket = socket;
    connection->uid = *uid;
    connection->deadline = absl::Now() + kRequestDeadline;
    connections_[socket] = std::move(connection);
  }
}

void ShareServer::TurnAway(int socket, uid_t uid, int error, absl::string_view why) {
  handler_.CountRefused();
  const ShareMessage refusal = ShareRefusal(ShareMagic(kShareVersion), error, why);
  (void)SendWithDescriptors(socket, refusal.bytes.data(), refusal.bytes.size(), nullptr, 0,
                            MSG_DONTWAIT);
  CloseConnection(socket, uid);
}

void ShareServer::CloseConnection(int socket, uid_t uid) {
  // Messages the peer sent and nobody read may carry descriptors, which
  // closing the socket would close here. Shut, the socket takes no more;
  // empty, it holds none.
  shutdown(socket, SHUT_RDWR);
  int unread = 0;
  if (ioctl(socket, FIONREAD, &unread) == 0 && unread == 0) {
    close(socket);
  } else {
    closer_.Close(socket, uid);
  }
}

void ShareServer::Read(Connection& connection) {
  switch (connection.reader.ReadFrom(connection.socket, handler_.settings().mount_device)) {
    case RequestReader::Progress::kPartial: return;
    case RequestReader::Progress::kEnded: return Drop(connection.socket);
    case RequestReader::Progress::kRefused:
      handler_.CountRefused();
      for (int fd : connection.reader.TakeDescriptors()) Dispose(fd, connection.uid);
      connection.outcome = ShareOutcome();
      connection.outcome.messages.push_back(connection.reader.TakeRefusal());
      return StartWriting(connection);
    case RequestReader::Progress::kComplete: break;
  }
  Job job;
  job.socket = connection.socket;
  job.uid = connection.uid;
  job.request = connection.reader.request();
  job.fds = connection.reader.TakeDescriptors();
  job.expected = connection.expected;
  job.previous.ino = connection.outcome.ino;
  job.previous.kind = connection.outcome.kind;
  job.previous.piece_bytes = connection.outcome.piece_bytes;
  connection.state = Connection::State::kWorking;
  absl::MutexLock lock(&mu_);
  (job.request.op == kShareMakeRoom ? room_jobs_ : jobs_).push_back(std::move(job));
}

void ShareServer::StartWriting(Connection& connection) {
  connection.writer.Restart();
  connection.state = Connection::State::kWriting;
  connection.deadline = absl::Now() + kReplyDeadline;
  Write(connection);
}

void ShareServer::Write(Connection& connection) {
  switch (connection.writer.WriteTo(connection.socket, connection.outcome.messages)) {
    case MessageWriter::Progress::kBlocked: return;
    case MessageWriter::Progress::kBroken: return Drop(connection.socket);
    case MessageWriter::Progress::kDone: break;
  }
  connection.outcome.messages.clear();
  if (connection.outcome.next == ShareNext::kClose) return Drop(connection.socket);
  connection.expected = connection.outcome.next;
  connection.reader.Reset();
  connection.state = Connection::State::kReading;
  connection.deadline = absl::Now() + (connection.expected == ShareNext::kImported
                                           ? kImportDeadline
                                           : kReplyDeadline);
}

void ShareServer::Finish(Done done) {
  auto it = connections_.find(done.socket);
  if (it == connections_.end()) return;  // dropped meanwhile
  Connection& connection = *it->second;
  connection.outcome = std::move(done.outcome);
  StartWriting(connection);
}

void ShareServer::Drop(int socket, bool stopping) {
  auto it = connections_.find(socket);
  if (it == connections_.end()) return;
  Connection& connection = *it->second;
  if (connection.state == Connection::State::kWorking && !stopping) {
    // A worker has its request: the socket stays open, so its number
    // cannot be reused before the worker's result comes back.
    shutdown(socket, SHUT_RDWR);
    return;
  }
  for (int fd : connection.reader.TakeDescriptors()) Dispose(fd, connection.uid);
  if (--per_user_[connection.uid] == 0) per_user_.erase(connection.uid);
  CloseConnection(socket, connection.uid);
  connections_.erase(it);
}

void ShareServer::Work(bool rooms) {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      bool (*const ready)(ShareServer*) =
          rooms ? +[](ShareServer* server) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return server->stopping_ || !server->room_jobs_.empty();
          }
                : +[](ShareServer* server) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    return server->stopping_ || !server->jobs_.empty();
                  };
      mu_.Await(absl::Condition(ready, this));
      std::deque<Job>& queue = rooms ? room_jobs_ : jobs_;
      if (stopping_) return;
      job = std::move(queue.front());
      queue.pop_front();
    }
    ShareOutcome outcome =
        handler_.Serve(job.request, job.uid, job.fds, job.expected, job.previous);
    for (int fd : job.fds) Dispose(fd, job.uid);
    {
      absl::MutexLock lock(&mu_);
      done_.push_back({job.socket, std::move(outcome)});
    }
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof one);
  }
}

void ShareServer::Dispose(int fd, uid_t uid) {
  if (ClosesAtOnce(fd)) {
    close(fd);
  } else {
    closer_.Close(fd, uid);
  }
}

}  // namespace cudafs
