#include "fs/daemon/abandoned_mount_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace cudafs {
namespace {

// Detaches `mount`, which no other mount covers, if its server is gone.
// False when its path does not lead to it (a symlink in its place, a mount
// over a directory above it): nothing is done then.
bool DetachIfAbandoned(const MountInfoLine& mount) {
  // O_NOFOLLOW here and UMOUNT_NOFOLLOW below: a symlink put in the
  // mountpoint's place cannot send the unmount elsewhere.
  const int fd = open(mount.mountpoint.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  if (MountIdOf(fd) != mount.id) {
    close(fd);
    return false;
  }
  // Through the descriptor: this mount's root, whatever the path leads to
  // by now.
  const int root = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool dead =
      root < 0 && (errno == ENOTCONN || errno == ECONNABORTED || errno == ECANCELED);
  if (root >= 0) close(root);
  close(fd);
  if (dead) umount2(mount.mountpoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  return true;
}

}  // namespace

absl::StatusOr<AbandonedMountWatcher> AbandonedMountWatcher::Start(
    const std::string& mountpoint) {
  // A socket, not a pipe: a write to a watcher that was killed must not
  // raise SIGPIPE in the daemon.
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("auto_unmount: socketpair: ", std::strerror(errno)));
  }
  // The watcher's stdin is its end of the socket. Nothing else of the
  // daemon's may stay open there: a copy of /dev/fuse would keep a dead
  // mount's connection alive, the caller's pipes (stdout too) would keep
  // the caller waiting, the daemon's directory would stay busy.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawn_file_actions_addchdir_np(&actions, "/");
  // Off the daemon's session, so that a terminal's signals do not reach it;
  // the stop signals stay blocked, as the daemon blocked them.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  // This binary again under the watcher's name: ps, and pkill -f, tell it
  // from the daemon.
  const char* argv[] = {kWatcherName, mountpoint.c_str(), nullptr};
  const int error = posix_spawn(nullptr, "/proc/self/exe", &actions, &attributes,
                                const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  AbandonedMountWatcher watcher(fds[0]);
  if (error != 0) {
    return absl::InternalError(absl::StrCat("auto_unmount: cannot start ", kWatcherName,
                                            " (/proc/self/exe): ", std::strerror(error)));
  }
  // No mount before the watcher says it runs: one made sooner would go
  // unwatched if the watcher failed to start, and until it has renamed
  // itself the watcher looks like a daemon of the mountpoint (this binary,
  // the mountpoint on its command line) to whoever looks for one.
  char ready;
  ssize_t got;
  do {
    got = recv(watcher.lifeline_, &ready, 1, 0);
  } while (got < 0 && errno == EINTR);
  if (got != 1) {
    return absl::InternalError(absl::StrCat("auto_unmount: ", kWatcherName, " did not start"));
  }
  return watcher;
}

AbandonedMountWatcher::AbandonedMountWatcher(AbandonedMountWatcher&& other) noexcept
    : lifeline_(std::exchange(other.lifeline_, -1)) {}

AbandonedMountWatcher::~AbandonedMountWatcher() {
  if (lifeline_ >= 0) close(lifeline_);
}

void AbandonedMountWatcher::Watch(const MountInfoLine& mount) {
  const std::string message = absl::StrCat(mount.id, " ", mount.device, "\n");
  (void)!send(lifeline_, message.data(), message.size(), MSG_NOSIGNAL);
}

int RunAbandonedMountWatcher() {
  // exec named the process after what it ran, /proc/self/exe.
  prctl(PR_SET_NAME, kWatcherName);
  (void)!send(STDIN_FILENO, "R", 1, MSG_NOSIGNAL);  // ready (Start waits for it)
  std::string message;
  char buffer[64];
  for (;;) {
    const ssize_t got = read(STDIN_FILENO, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    message.append(buffer, static_cast<size_t>(got));
  }
  // The daemon is gone. Without a message it never mounted.
  const std::pair<absl::string_view, absl::string_view> fields =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(message), ' ');
  int id;
  if (!absl::SimpleAtoi(fields.first, &id) || fields.second.empty()) return 0;
  const int mountinfo = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (mountinfo < 0) return 1;
  for (;;) {
    const std::vector<MountInfoLine> mounts = ParseMountInfo(ReadFromStart(mountinfo));
    // The device as well: ids are reused once a mount is gone.
    const auto mount = absl::c_find_if(mounts, [&](const MountInfoLine& m) {
      return m.id == id && m.device == fields.second;
    });
    if (mount == mounts.end()) return 0;
    if (!IsCovered(mounts, *mount) && DetachIfAbandoned(*mount)) return 0;
    // mountinfo reports POLLPRI once the mount table has changed since it
    // was opened or last polled.
    pollfd changed = {.fd = mountinfo, .events = POLLPRI, .revents = 0};
    while (poll(&changed, 1, -1) < 0) {
      if (errno != EINTR) return 1;
    }
  }
}

}  // namespace cudafs
