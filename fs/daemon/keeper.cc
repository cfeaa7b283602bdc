#include "fs/daemon/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "alloc/base/coding.h"
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/helper_process.h"
#include "fs/daemon/mount_info.h"
#include "fs/wire/descriptor_socket.h"

extern char** environ;

namespace cudafs {
namespace {

constexpr char kFarewell = 'B';
// A GPU piece mapped (its descriptor with it) or released: the kind, then
// the GPU, offset, length and committed granules as varints.
constexpr char kPieceMapped = 'M';
constexpr char kPieceReleased = 'U';
constexpr size_t kMaxPieceMessage = 64;
// How long a successor that failed is let be before the next.
constexpr absl::Duration kRetryPause = absl::Seconds(1);

void Say(int priority, const std::string& mountpoint, absl::string_view what) {
  syslog(priority, "%s: %.*s", mountpoint.c_str(), static_cast<int>(what.size()), what.data());
}

// Starts a successor with the mount's command line and `connection` as
// its descriptor 3 (kKeeperFdVariable); its pid, or -1.
pid_t StartSuccessor(const HandedOver& held, const std::string& mountpoint, int connection) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, connection, 3);  // clears close-on-exec
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  std::vector<std::string> environment = {absl::StrCat(kKeeperFdVariable, "=3"),
                                          absl::StrCat(kKeeperMountpointVariable, "=", mountpoint)};
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const absl::string_view entry(*variable);
    if (!absl::StartsWith(entry, "CUDAFS_KEEPER_")) environment.emplace_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> arguments = held.arguments;
  if (arguments.empty()) arguments.push_back("cudafs");
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int error =
      posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

// Detaches the mount at `mountpoint` if it is a cudafs one whose server
// is gone (no other mount made there since).
void Detach(const std::string& mountpoint) {
  const std::optional<MountInfoLine> mount = MountAt(mountpoint);
  if (!mount || mount->fstype != "fuse.cudafs") return;
  if (geteuid() == 0) {
    DetachIfAbandoned(*mount);
    return;
  }
  pid_t pid = -1;
  const char* argv[] = {"fusermount3", "-u", "-z", "--", mountpoint.c_str(), nullptr};
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char* const*>(argv),
                   environ) == 0) {
    waitpid(pid, nullptr, 0);
  }
}

// A piece message's change, or why it is none.
absl::StatusOr<DeviceHandOver::PieceChange> ReceivePieceChange(int connection) {
  char message[kMaxPieceMessage];
  std::vector<int> fds;
  bool refused = false;
  const ssize_t n =
      ReceiveWithDescriptors(connection, message, sizeof message, 0, 1, &fds, &refused);
  DeviceHandOver::PieceChange change;
  change.mapped = n > 0 && message[0] == kPieceMapped;
  absl::string_view in(message, n > 0 ? static_cast<size_t>(n) : 0);
  in.remove_prefix(std::min<size_t>(in.size(), 1));
  uint64_t gpu = 0;
  const bool ok = n > 0 && !refused && GetVarintUpTo(&in, 64, &gpu) &&
                  GetVarint(&in, &change.piece.offset) && GetVarint(&in, &change.piece.length) &&
                  GetVarint(&in, &change.piece.committed) && in.empty();
  change.gpu = gpu;
  if (!ok || fds.size() != (change.mapped ? 1u : 0u)) {
    for (const int fd : fds) close(fd);
    return absl::InvalidArgumentError("a piece message that is none");
  }
  if (change.mapped) change.piece.fd = fds.front();
  return change;
}

// Waits for the daemon on `connection`: true when it died (its end
// closed without a farewell), false after a farewell. Holds what it sends
// in `held`, and follows the changes of its GPU pieces there; those that
// come before it (the daemon watches before it takes what the keeper is
// to hold) wait in `pending`, and apply after it in order, which leaves
// what a later state says.
void Follow(HandedOver& held, const DeviceHandOver::PieceChange& change,
            const std::string& mountpoint) {
  if (absl::Status s = held.memory.Apply(change); !s.ok()) {
    Say(LOG_ERR, mountpoint, absl::StrCat("a GPU piece: ", s.message()));
  }
}

bool IsPieceChange(char kind) { return kind == kPieceMapped || kind == kPieceReleased; }

// The kind of the next message on `connection`, once one came within
// `timeout`; nullopt when none did, or the connection closed.
std::optional<char> NextKind(int connection, absl::Duration timeout) {
  for (;;) {
    pollfd ready = {.fd = connection, .events = POLLIN, .revents = 0};
    const int polled =
        poll(&ready, 1,
             timeout == absl::InfiniteDuration()
                 ? -1
                 : static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) return std::nullopt;
    char kind = 0;
    const ssize_t n = recv(connection, &kind, 1, MSG_PEEK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    return kind;
  }
}

// A successor's answer on `connection`. It may release GPU pieces it took
// over and finds unused before it answers: those changes come first.
absl::Status AwaitAnswer(int connection, HandedOver& held, const std::string& mountpoint) {
  for (;;) {
    const std::optional<char> kind = NextKind(connection, HandOverListener::kTimeout);
    if (!kind || !IsPieceChange(*kind)) return ReceiveAnswer(connection);
    absl::StatusOr<DeviceHandOver::PieceChange> change = ReceivePieceChange(connection);
    if (!change.ok()) return change.status();
    Follow(held, *change, mountpoint);
  }
}

bool AwaitDeath(int connection, std::optional<HandedOver>& held, const std::string& mountpoint) {
  std::vector<DeviceHandOver::PieceChange> pending;
  for (;;) {
    const std::optional<char> kind = NextKind(connection, absl::InfiniteDuration());
    if (!kind) return true;  // closed: the daemon is gone
    if (*kind == kFarewell) return false;
    if (IsPieceChange(*kind)) {
      absl::StatusOr<DeviceHandOver::PieceChange> change = ReceivePieceChange(connection);
      if (!change.ok()) {
        Say(LOG_ERR, mountpoint, change.status().message());
      } else if (held) {
        Follow(*held, *change, mountpoint);
      } else {
        pending.push_back(*change);
      }
      continue;
    }
    absl::StatusOr<HandedOver> state = ReceiveHandedOver(connection);
    if (state.ok()) {
      held.reset();
      held.emplace(*std::move(state));
      for (const DeviceHandOver::PieceChange& change : pending) Follow(*held, change, mountpoint);
      pending.clear();
    } else {
      Say(LOG_ERR, mountpoint, absl::StrCat("the daemon's state did not come: ",
                                            state.status().message()));
    }
  }
}

}  // namespace

absl::StatusOr<KeeperLink> KeeperLink::Start(const std::string& mountpoint) {
  absl::StatusOr<int> connection = StartHelperProcess(kKeeperName, mountpoint, SOCK_SEQPACKET);
  if (!connection.ok()) {
    return absl::InternalError(absl::StrCat("survive: ", connection.status().message()));
  }
  return KeeperLink(*connection);
}

KeeperLink::KeeperLink(KeeperLink&& other) noexcept ABSL_NO_THREAD_SAFETY_ANALYSIS
    : mu_(std::move(other.mu_)),
      connection_(std::exchange(other.connection_, -1)) {}

KeeperLink::~KeeperLink() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (connection_ >= 0) close(connection_);
}

absl::Status KeeperLink::Hold(const HandedOver& state) {
  absl::MutexLock lock(mu_.get());
  return SendHandedOver(connection_, state);
}

absl::Status KeeperLink::Follow(const DeviceHandOver::PieceChange& change) {
  std::string message(1, change.mapped ? kPieceMapped : kPieceReleased);
  PutVarint(&message, change.gpu);
  PutVarint(&message, change.piece.offset);
  PutVarint(&message, change.piece.length);
  PutVarint(&message, change.piece.committed);
  ssize_t sent;
  {
    absl::MutexLock lock(mu_.get());
    // After a farewell the daemon frees what it holds on its way out.
    if (connection_ < 0) {
      if (change.mapped) close(change.piece.fd);
      return absl::OkStatus();
    }
    sent = SendWithDescriptors(connection_, message.data(), message.size(), &change.piece.fd,
                               change.mapped ? 1 : 0, 0);
  }
  const int error = errno;
  if (change.mapped) close(change.piece.fd);
  if (sent != static_cast<ssize_t>(message.size())) {
    return absl::ErrnoToStatus(sent < 0 ? error : EMSGSIZE, "telling the keeper of a GPU piece");
  }
  return absl::OkStatus();
}

void KeeperLink::Farewell() {
  absl::MutexLock lock(mu_.get());
  if (connection_ < 0) return;
  (void)!send(connection_, &kFarewell, 1, MSG_NOSIGNAL);
  close(std::exchange(connection_, -1));
}

int RunKeeper(const std::string& mountpoint) {
  HelperRuns(kKeeperName);
  openlog("cudafs-keeper", LOG_PID, LOG_DAEMON);
  // Successors are reaped by the kernel; a write to one that died is an
  // error, not a signal.
  signal(SIGCHLD, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  int connection = STDIN_FILENO;
  std::optional<HandedOver> held;
  while (AwaitDeath(connection, held, mountpoint)) {
    close(connection);
    connection = -1;
    if (!held) {
      // It died before the kernel's INIT came: no successor could take over.
      Detach(mountpoint);
      return 1;
    }
    Say(LOG_WARNING, mountpoint, "the daemon died: starting another");
    for (int attempt = 1; attempt <= KeeperLink::kMaxAttempts && connection < 0; ++attempt) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) break;
      const pid_t successor = StartSuccessor(*held, mountpoint, pair[1]);
      close(pair[1]);
      absl::Status serving = successor < 0 ? absl::InternalError("cannot start a successor")
                                           : SendHandedOver(pair[0], *held);
      if (serving.ok()) serving = AwaitAnswer(pair[0], *held, mountpoint);
      if (serving.ok()) {
        connection = pair[0];
        Say(LOG_NOTICE, mountpoint, "a successor serves the mount");
        break;
      }
      Say(LOG_ERR, mountpoint,
          absl::StrCat("successor ", attempt, " of ", KeeperLink::kMaxAttempts,
                       " failed: ", serving.message()));
      close(pair[0]);
      if (successor > 0) kill(successor, SIGKILL);
      absl::SleepFor(kRetryPause);
    }
    if (connection < 0) {
      Say(LOG_ERR, mountpoint, "no successor could take the mount over: its files are lost");
      held.reset();  // the connection goes: the mount answers ENOTCONN
      Detach(mountpoint);
      return 1;
    }
  }
  return 0;  // a farewell: what was held is closed with the process
}

}  // namespace cudafs
