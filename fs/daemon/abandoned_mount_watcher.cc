#include "fs/daemon/abandoned_mount_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
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
#include "fs/daemon/helper_process.h"

namespace cudafs {

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

absl::StatusOr<AbandonedMountWatcher> AbandonedMountWatcher::Start(
    const std::string& mountpoint) {
  // A socket, not a pipe: a write to a watcher that was killed must not
  // raise SIGPIPE in the daemon. No mount before the watcher runs: one made
  // sooner would go unwatched if it failed to start.
  absl::StatusOr<int> lifeline = StartHelperProcess(kWatcherName, mountpoint, SOCK_STREAM);
  if (!lifeline.ok()) {
    return absl::InternalError(absl::StrCat("auto_unmount: ", lifeline.status().message()));
  }
  return AbandonedMountWatcher(*lifeline);
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
  HelperRuns(kWatcherName);
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
