#include "fs/daemon/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

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
#include "fs/daemon/abandoned_mount_watcher.h"
#include "fs/daemon/helper_process.h"
#include "fs/daemon/mount_info.h"

extern char** environ;

namespace cudafs {
namespace {

constexpr char kFarewell = 'B';
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

// Waits for the daemon on `connection`: true when it died (its end
// closed without a farewell), false after a farewell. Holds what it sends
// in `held`.
bool AwaitDeath(int connection, std::optional<HandedOver>& held, const std::string& mountpoint) {
  for (;;) {
    pollfd ready = {.fd = connection, .events = POLLIN, .revents = 0};
    if (poll(&ready, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return true;
    }
    char kind = 0;
    const ssize_t n = recv(connection, &kind, 1, MSG_PEEK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // closed: the daemon is gone
    if (kind == kFarewell) return false;
    absl::StatusOr<HandedOver> state = ReceiveHandedOver(connection);
    if (state.ok()) {
      held.reset();
      held.emplace(*std::move(state));
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

KeeperLink::KeeperLink(KeeperLink&& other) noexcept
    : connection_(std::exchange(other.connection_, -1)) {}

KeeperLink::~KeeperLink() {
  if (connection_ >= 0) close(connection_);
}

absl::Status KeeperLink::Hold(const HandedOver& state) {
  return SendHandedOver(connection_, state);
}

void KeeperLink::Farewell() {
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
      if (serving.ok()) serving = ReceiveAnswer(pair[0]);
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
