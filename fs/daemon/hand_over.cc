#include "fs/daemon/hand_over.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alloc/base/coding.h"
#include "alloc/base/errors.h"
#include "fs/wire/abstract_address.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs {
namespace {

// The format of the message: a successor of another version refuses it.
constexpr uint64_t kVersion = 1;
constexpr char kState = 'S';
constexpr char kRefusal = 'E';
constexpr char kServing = 'K';
constexpr char kMoreDescriptors = 'F';
// The header; the image rides in a memfd of its own.
constexpr size_t kMaxMessage = 64 * 1024;

// The socket a successor listens on for daemon `daemon`'s hand-over.
AbstractAddress AddressOf(pid_t daemon) {
  return *AbstractAddress::Of(absl::StrCat("cudafs-hand-over-", daemon));  // short: fits
}

// Waits until `fd` is readable, for at most `timeout`.
bool Readable(int fd, absl::Duration timeout) {
  pollfd poll_fd{fd, POLLIN, 0};
  int result;
  do {
    result = poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  } while (result < 0 && errno == EINTR);
  return result > 0;
}

absl::StatusOr<ucred> PeerOf(int socket) {
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    return absl::ErrnoToStatus(errno, "SO_PEERCRED");
  }
  return peer;
}

// The whole of memfd `fd`, `size` bytes.
absl::StatusOr<std::string> ReadAll(int fd, uint64_t size) {
  std::string bytes(size, '\0');
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = pread(fd, bytes.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::DataLossError("the image handed over is cut short");
    done += static_cast<uint64_t>(n);
  }
  return bytes;
}

absl::StatusOr<int> ImageMemfd(const std::string& image) {
  const int fd = memfd_create("cudafs-image", MFD_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "memfd_create for the image");
  for (size_t done = 0; done < image.size();) {
    const ssize_t n = write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      close(fd);
      return absl::ErrnoToStatus(error, "writing the image");
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

absl::Status TooFewDescriptors() {
  return absl::ResourceExhaustedError(
      "the daemon's memory came incomplete: this process may open too few files (ulimit -n)");
}

// `message` with `fds`: as many as one message carries with it, the rest
// in messages of their own that follow (kMoreDescriptors).
absl::Status Send(int connection, const std::string& message, const std::vector<int>& fds) {
  size_t done = std::min(fds.size(), kMaxDescriptorsPerMessage);
  if (SendWithDescriptors(connection, message.data(), message.size(), fds.data(), done, 0) !=
      static_cast<ssize_t>(message.size())) {
    return absl::ErrnoToStatus(errno, "sending the mount to the successor");
  }
  while (done < fds.size()) {
    const size_t count = std::min(fds.size() - done, kMaxDescriptorsPerMessage);
    if (SendWithDescriptors(connection, &kMoreDescriptors, 1, fds.data() + done, count, 0) != 1) {
      return absl::ErrnoToStatus(errno, "sending the mount's memory to the successor");
    }
    done += count;
  }
  return absl::OkStatus();
}

// Receives the descriptors that follow the header until `fds` holds
// `count`.
absl::Status ReceiveMore(int connection, size_t count, std::vector<int>* fds) {
  while (fds->size() < count) {
    if (!Readable(connection, HandOverListener::kTimeout)) {
      return absl::DeadlineExceededError("the daemon stopped sending its memory");
    }
    char tag = 0;
    bool refused = false;
    const size_t before = fds->size();
    const ssize_t n = ReceiveWithDescriptors(connection, &tag, 1, 0, count, fds, &refused);
    if (n != 1 || tag != kMoreDescriptors || refused || fds->size() == before) {
      return TooFewDescriptors();
    }
  }
  return absl::OkStatus();
}

}  // namespace

HandedOver::HandedOver(HandedOver&& other) noexcept
    : fuse_fd(std::exchange(other.fuse_fd, -1)),
      memory(std::move(other.memory)),
      capacity(other.capacity),
      generation(other.generation),
      init_request(std::move(other.init_request)),
      negotiation(std::move(other.negotiation)),
      image(std::move(other.image)),
      arguments(std::move(other.arguments)),
      log_fd(std::exchange(other.log_fd, -1)) {}

HandedOver::~HandedOver() {
  if (fuse_fd >= 0) close(fuse_fd);
  if (log_fd >= 0) close(log_fd);
}

absl::Status SendRefusal(int connection, const absl::Status& why) {
  const std::string message = absl::StrCat(std::string(1, kRefusal), why.message());
  if (absl::Status sent = Send(connection, message, {}); !sent.ok()) return sent;
  return why;
}

absl::Status SendHandedOver(int connection, const HandedOver& state) {
  absl::StatusOr<int> image = ImageMemfd(state.image);
  if (!image.ok()) return SendRefusal(connection, image.status());
  std::string message(1, kState);
  PutVarint(&message, kVersion);
  PutVarint(&message, state.capacity);
  PutVarint(&message, state.generation);
  PutBytes(&message, state.init_request);
  PutBytes(&message, state.negotiation);
  PutVarint(&message, state.image.size());
  PutVarint(&message, state.arguments.size());
  for (const std::string& argument : state.arguments) PutBytes(&message, argument);
  PutBytes(&message, state.memory.layout());
  PutVarint(&message, state.memory.fds().size());
  std::vector<int> fds = {state.fuse_fd, *image};
  fds.insert(fds.end(), state.memory.fds().begin(), state.memory.fds().end());
  // The metadata log rides last, and only where there is one: a message
  // without it is what a cudafs older than the log sends.
  if (state.log_fd >= 0) {
    PutVarint(&message, 1);
    fds.push_back(state.log_fd);
  }
  const absl::Status sent = Send(connection, message, fds);
  close(*image);
  return sent;
}

absl::Status ReceiveAnswer(int connection) {
  char answer[4096];
  if (!Readable(connection, HandOverListener::kTimeout)) {
    return absl::DeadlineExceededError("the successor did not answer");
  }
  const ssize_t n = recv(connection, answer, sizeof(answer), 0);
  if (n == 1 && answer[0] == kServing) return absl::OkStatus();
  if (n > 1 && answer[0] == kRefusal) {
    return absl::FailedPreconditionError(
        absl::StrCat("the successor refused: ", absl::string_view(answer + 1, n - 1)));
  }
  return absl::UnavailableError("the successor went away");
}

void SendAnswer(int connection, const absl::Status& serving) {
  if (connection < 0) return;
  const std::string answer = serving.ok() ? std::string(1, kServing)
                                          : absl::StrCat(std::string(1, kRefusal), serving.message());
  (void)!send(connection, answer.data(), answer.size(), MSG_NOSIGNAL);
}

absl::Status HandOver(absl::FunctionRef<absl::StatusOr<HandedOver>()> make_state) {
  const int connection = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (connection < 0) return absl::ErrnoToStatus(errno, "socket");
  absl::Cleanup close_connection = [connection] { close(connection); };
  const AbstractAddress address = AddressOf(getpid());
  if (connect(connection, address.get(), address.length) != 0) {
    return absl::ErrnoToStatus(errno, "SIGUSR1 came, but no successor listens (cudafs --upgrade)");
  }
  const absl::StatusOr<ucred> peer = PeerOf(connection);
  if (!peer.ok() || (peer->uid != 0 && peer->uid != getuid())) {
    return absl::PermissionDeniedError(
        "the process waiting for the mount is neither root nor the mount's user: ignored");
  }
  const absl::StatusOr<HandedOver> state = make_state();
  const absl::Status sent =
      state.ok() ? SendHandedOver(connection, *state) : SendRefusal(connection, state.status());
  if (!sent.ok()) return sent;
  return ReceiveAnswer(connection);
}

absl::StatusOr<HandOverListener> HandOverListener::Ask(pid_t daemon) {
  const int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) return absl::ErrnoToStatus(errno, "socket");
  HandOverListener result(listener, daemon);
  const AbstractAddress address = AddressOf(daemon);
  if (bind(listener, address.get(), address.length) != 0 || listen(listener, 1) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot wait for daemon %d (another upgrade of it running?)", daemon));
  }
  if (kill(daemon, SIGUSR1) != 0) {
    return errno == EPERM
               ? absl::PermissionDeniedError("only root and the mount's user may upgrade it")
               : absl::ErrnoToStatus(errno, absl::StrFormat("daemon %d", daemon));
  }
  return result;
}

HandOverListener::HandOverListener(HandOverListener&& other) noexcept
    : listener_(std::exchange(other.listener_, -1)),
      daemon_(other.daemon_),
      connection_(std::exchange(other.connection_, -1)) {}

HandOverListener::~HandOverListener() {
  if (connection_ >= 0) close(connection_);
  if (listener_ >= 0) close(listener_);
}

absl::StatusOr<HandedOver> HandOverListener::Receive() {
  if (!Readable(listener_, kTimeout)) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "daemon %d did not hand its mount over within %d s (a daemon older than --upgrade "
        "ignores the request: remount it)",
        daemon_, absl::ToInt64Seconds(kTimeout)));
  }
  connection_ = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (connection_ < 0) return absl::ErrnoToStatus(errno, "accept");
  const absl::StatusOr<ucred> peer = PeerOf(connection_);
  if (!peer.ok() || peer->pid != daemon_) {
    return absl::PermissionDeniedError("another process than the daemon answered");
  }
  return ReceiveHandedOver(connection_);
}

absl::StatusOr<HandedOver> ReceiveHandedOver(int connection) {
  if (!Readable(connection, HandOverListener::kTimeout)) {
    return absl::DeadlineExceededError("the daemon sent nothing");
  }
  std::string message(kMaxMessage, '\0');
  std::vector<int> fds;
  // Closes every descriptor not handed on.
  absl::Cleanup close_fds = [&fds] {
    for (const int fd : fds) {
      if (fd >= 0) close(fd);
    }
  };
  bool refused = false;
  const ssize_t n = ReceiveWithDescriptors(connection, message.data(), message.size(), 0,
                                           kMaxDescriptorsPerMessage, &fds, &refused);
  if (refused) return TooFewDescriptors();
  if (n <= 0) return absl::UnavailableError("the daemon sent nothing usable");
  message.resize(static_cast<size_t>(n));
  if (message[0] == kRefusal) return absl::FailedPreconditionError(message.substr(1));
  absl::string_view in(message);
  in.remove_prefix(1);
  HandedOver handed;
  uint64_t version = 0, generation = 0, image_size = 0, argument_count = 0, memory_fds = 0;
  absl::string_view init, negotiation, layout;
  bool parsed = message[0] == kState && GetVarint(&in, &version) && version == kVersion &&
                GetVarint(&in, &handed.capacity) && GetVarintUpTo(&in, UINT32_MAX, &generation) &&
                GetBytes(&in, &init) && GetBytes(&in, &negotiation) &&
                GetVarint(&in, &image_size) && GetVarintUpTo(&in, in.size(), &argument_count);
  for (uint64_t i = 0; parsed && i < argument_count; ++i) {
    absl::string_view argument;
    parsed = GetBytes(&in, &argument);
    handed.arguments.emplace_back(argument);
  }
  // The fuse device and the image come first.
  uint64_t log_fds = 0;
  parsed = parsed && GetBytes(&in, &layout) && GetVarintUpTo(&in, 1 << 24, &memory_fds) &&
           (in.empty() || GetVarintUpTo(&in, 1, &log_fds)) && in.empty() &&
           fds.size() == std::min<uint64_t>(2 + memory_fds + log_fds, kMaxDescriptorsPerMessage);
  if (!parsed) {
    return absl::InvalidArgumentError(
        "the daemon speaks another hand-over format: upgrade needs a remount this time");
  }
  if (absl::Status s = ReceiveMore(connection, 2 + memory_fds + log_fds, &fds); !s.ok()) {
    return s;
  }
  if (log_fds != 0) {
    handed.log_fd = fds.back();
    fds.pop_back();
  }
  absl::StatusOr<std::string> image = ReadAll(fds[1], image_size);
  if (!image.ok()) return image.status();
  handed.fuse_fd = std::exchange(fds[0], -1);
  handed.memory = DeviceHandOver(std::string(layout), std::vector<int>(fds.begin() + 2, fds.end()));
  fds.resize(2);
  handed.generation = static_cast<uint32_t>(generation);
  handed.init_request = std::string(init);
  handed.negotiation = std::string(negotiation);
  handed.image = *std::move(image);
  return handed;
}

void HandOverListener::Answer(const absl::Status& serving) { SendAnswer(connection_, serving); }

}  // namespace cudafs
