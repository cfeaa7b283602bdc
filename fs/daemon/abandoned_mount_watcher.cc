#include "fs/daemon/abandoned_mount_watcher.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cudafs {

namespace {

// The watcher's whole life; async-signal-safe calls only, since it is
// forked from a process that may run other threads.
[[noreturn]] void Watch(int lifeline, const char* mountpoint) {
  // Off the daemon's session, so that a terminal's signals do not reach it;
  // the stop signals stay blocked, as the daemon blocked them.
  setsid();
  prctl(PR_SET_NAME, "cudafs-unmount");
  // Nothing of the daemon's may stay open here: a copy of /dev/fuse (or of
  // an io_uring ring) would keep the dead mount's connection alive.
  if (lifeline > 0) close_range(0, lifeline - 1, 0);
  close_range(lifeline + 1, ~0U, 0);
  char byte;
  while (read(lifeline, &byte, 1) != 0 && errno == EINTR) {
  }
  const int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOTCONN || errno == ECONNABORTED || errno == ECANCELED)) {
    umount2(mountpoint, MNT_DETACH);
  }
  _exit(0);
}

}  // namespace

absl::Status WatchForAbandonedMount(const std::string& mountpoint) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("auto_unmount: pipe: ", std::strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("auto_unmount: fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    close(fds[1]);
    Watch(fds[0], mountpoint.c_str());
  }
  close(fds[0]);
  // fds[1] stays open, unused, until the daemon exits: that is the signal.
  return absl::OkStatus();
}

}  // namespace cudafs
