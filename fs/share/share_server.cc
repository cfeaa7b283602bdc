#include "fs/share/share_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_format.h"
#include "alloc/base/errors.h"
#include "alloc/base/log.h"
#include "fs/client/protocol.h"

namespace cudafs {
namespace {

// A client that stalls mid-request holds a connection no longer than this.
constexpr timeval kReceiveTimeout = {5, 0};

// Receives one request and the descriptor that came with it (-1 if none).
// False on EOF, a timeout or a malformed message.
bool ReceiveRequest(int connection, cudafs_share_request* request, int* fd) {
  size_t count = 0;
  const ssize_t got = cudafs_share_receive(connection, request, sizeof *request, fd, 1, &count);
  if (count == 0) *fd = -1;
  return got == static_cast<ssize_t>(sizeof *request) && request->magic == CUDAFS_SHARE_MAGIC;
}

void SendReply(int connection, const cudafs_share_reply& reply, const int* fds, size_t count) {
  (void)cudafs_share_send(connection, &reply, sizeof reply, fds, count);
}

// A reply: `error` 0 and no words for success, filled in by the caller.
cudafs_share_reply Reply(int error, absl::string_view why) {
  cudafs_share_reply reply = {};
  reply.magic = CUDAFS_SHARE_MAGIC;
  reply.error = error;
  absl::SNPrintF(reply.message, sizeof reply.message, "%s", why);
  return reply;
}

// The reply to a request that failed with `status` (or succeeded, with
// nothing more to say).
cudafs_share_reply Refusal(const absl::Status& status) {
  if (status.ok()) return Reply(0, "");
  const int error = ToErrno(status);
  if (error == EIO) LogError(status.ToString());
  return Reply(error, status.message());
}

// Whether the peer of `connection` may use the mount (FUSE's rule).
bool PeerAllowed(int connection, const ShareSettings& settings) {
  ucred peer = {};
  socklen_t length = sizeof peer;
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return false;
  return settings.allow_other || peer.uid == settings.owner ||
         (settings.allow_root && peer.uid == 0);
}

// The inode `fd` stands for, after the checks of the class comment.
absl::StatusOr<InodeNumber> CheckDescriptor(int fd, uint32_t flags, dev_t mount_device) {
  if (fd < 0) return PosixError(EBADF, "no descriptor came with the request");
  const int status_flags = fcntl(fd, F_GETFL);
  if (status_flags < 0) return PosixError(EBADF, "the descriptor is not open");
  if (status_flags & O_PATH) return PosixError(EBADF, "an O_PATH descriptor grants no access");
  const int access = status_flags & O_ACCMODE;
  if (flags & CUDAFS_SHARE_WRITABLE) {
    if (access != O_RDWR) {
      return PosixError(EACCES, "a writable mapping needs a descriptor open for reading and "
                                "writing");
    }
  } else if (access == O_WRONLY) {
    return PosixError(EBADF, "a copy needs a descriptor open for reading");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return PosixError(errno, "fstat of the descriptor");
  if (st.st_dev != mount_device) {
    return PosixError(EXDEV, "the descriptor is not of a file on this mount");
  }
  if (S_ISDIR(st.st_mode)) return PosixError(EISDIR, "a directory cannot be mapped");
  if (!S_ISREG(st.st_mode)) return PosixError(EINVAL, "only regular files can be mapped");
  return static_cast<InodeNumber>(st.st_ino);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShareServer>> ShareServer::Start(Filesystem* filesystem,
                                                                const ShareSettings& settings) {
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return absl::ErrnoToStatus(errno, "socket");
  std::random_device random;
  const std::string name = absl::StrFormat("cudafs-%d-%08x%08x", getpid(), random(), random());
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener, static_cast<int>(kMaxWaiting)) != 0) {
    const int error = errno;
    close(listener);
    return absl::ErrnoToStatus(error, "cannot listen on the share socket");
  }
  std::unique_ptr<ShareServer> server(new ShareServer(filesystem, settings, listener, "@" + name));
  server->acceptor_ = std::thread([raw = server.get()] { raw->Accept(); });
  for (int i = 0; i < kWorkers; ++i) {
    server->workers_.emplace_back([raw = server.get()] { raw->Work(); });
  }
  return server;
}

ShareServer::~ShareServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (int connection : serving_) shutdown(connection, SHUT_RDWR);
  }
  shutdown(listener_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  for (std::thread& worker : workers_) worker.join();
  absl::MutexLock lock(&mu_);
  for (int connection : waiting_) close(connection);
  close(listener_);
}

ShareServer::Stats ShareServer::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

void ShareServer::Accept() {
  for (;;) {
    const int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      absl::MutexLock lock(&mu_);
      if (!stopping_) LogError(absl::StrCat("share socket: accept: ", std::strerror(errno)));
      return;
    }
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &kReceiveTimeout, sizeof kReceiveTimeout);
    absl::MutexLock lock(&mu_);
    if (stopping_ || waiting_.size() >= kMaxWaiting) {
      SendReply(connection, Reply(EAGAIN, "too many requests at once"), nullptr, 0);
      close(connection);
      continue;
    }
    waiting_.push_back(connection);
  }
}

void ShareServer::Work() {
  for (;;) {
    int connection;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ShareServer* server) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return server->stopping_ || !server->waiting_.empty();
          },
          this));
      if (stopping_) return;
      connection = waiting_.front();
      waiting_.pop_front();
      serving_.insert(connection);
    }
    Serve(connection);
    absl::MutexLock lock(&mu_);
    serving_.erase(connection);
    close(connection);
  }
}

void ShareServer::Serve(int connection) {
  cudafs_share_request request;
  int fd = -1;
  if (!ReceiveRequest(connection, &request, &fd)) {
    if (fd >= 0) close(fd);
    return;
  }
  const bool sync = request.op == CUDAFS_SHARE_SYNC;
  // A sync vouches for writes: it needs what a writable mapping needs.
  const uint32_t flags = sync ? request.flags | CUDAFS_SHARE_WRITABLE : request.flags;
  absl::StatusOr<InodeNumber> ino =
      request.op != CUDAFS_SHARE_MAP && !sync ? PosixError(EINVAL, "unknown request")
      : !PeerAllowed(connection, settings_)
          ? PosixError(EACCES, "this mount lets only its owner in (allow_other lets others)")
          : CheckDescriptor(fd, flags, settings_.mount_device);
  if (fd >= 0) close(fd);
  if (sync) {
    absl::Status status = ino.ok() ? filesystem_->NoteMappedWrite(*ino) : ino.status();
    if (status.ok() && settings_.file_changed) settings_.file_changed(*ino);
    Count(status.ok(), [](Stats& stats) { ++stats.syncs; });
    SendReply(connection, Refusal(status), nullptr, 0);
    return;
  }
  const bool shared = flags & CUDAFS_SHARE_WRITABLE;
  absl::StatusOr<std::unique_ptr<ExportedMemory>> exported =
      !ino.ok() ? ino.status()
      : shared  ? filesystem_->ExportShared(*ino)
                : filesystem_->ExportCopy(*ino);
  if (!exported.ok()) {
    Count(false, [](Stats&) {});
    SendReply(connection, Refusal(exported.status()), nullptr, 0);
    return;
  }
  const absl::Span<const ExportedPiece> pieces = (*exported)->pieces();
  cudafs_share_reply reply = Reply(0, "");
  reply.kind = (*exported)->kind() == ExportedMemory::Kind::kCuda ? CUDAFS_SHARE_CUDA
                                                                   : CUDAFS_SHARE_HOST;
  // Each GPU once, in the order its pieces first come.
  std::vector<uint8_t> gpu_of(pieces.size(), 0);
  for (size_t i = 0; i < pieces.size() && reply.kind == CUDAFS_SHARE_CUDA; ++i) {
    uint32_t g = 0;
    while (g < reply.gpus && pieces[i].pci_bus_id != reply.pci_bus_id[g]) ++g;
    if (g == CUDAFS_SHARE_MAX_GPUS) {
      Count(false, [](Stats&) {});
      SendReply(connection, Reply(EOPNOTSUPP, "the file lies on more GPUs than a mapping names"),
                nullptr, 0);
      return;
    }
    if (g == reply.gpus) {
      absl::SNPrintF(reply.pci_bus_id[g], sizeof reply.pci_bus_id[g], "%s", pieces[i].pci_bus_id);
      ++reply.gpus;
    }
    gpu_of[i] = static_cast<uint8_t>(g);
  }
  const uint64_t bytes = (*exported)->size();
  Count(true, [&](Stats& stats) {
    ++(shared ? stats.shared : stats.copies);
    (shared ? stats.shared_bytes : stats.copied_bytes) += bytes;
  });
  reply.size = bytes;
  reply.pieces = static_cast<uint32_t>(pieces.size());
  SendReply(connection, reply, nullptr, 0);
  for (size_t first = 0; first < pieces.size(); first += CUDAFS_SHARE_BATCH) {
    cudafs_share_pieces batch = {};
    batch.magic = CUDAFS_SHARE_MAGIC;
    batch.count = static_cast<uint32_t>(std::min<size_t>(CUDAFS_SHARE_BATCH, pieces.size() - first));
    int fds[CUDAFS_SHARE_BATCH];
    for (uint32_t i = 0; i < batch.count; ++i) {
      batch.piece_size[i] = pieces[first + i].size;
      batch.piece_gpu[i] = gpu_of[first + i];
      fds[i] = pieces[first + i].fd;
    }
    if (cudafs_share_send(connection, &batch, sizeof batch, fds, batch.count) !=
        static_cast<ssize_t>(sizeof batch)) {
      return;  // the client went away
    }
  }
  // Our handles go once the client has its own (or gave up).
  cudafs_share_request imported;
  int unexpected = -1;
  if (ReceiveRequest(connection, &imported, &unexpected) && unexpected >= 0) close(unexpected);
}

void ShareServer::Count(bool ok, absl::FunctionRef<void(Stats&)> count) {
  absl::MutexLock lock(&stats_mu_);
  ++stats_.requests;
  if (!ok) ++stats_.refused;
  count(stats_);
}

}  // namespace cudafs
