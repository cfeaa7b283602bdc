#include "fs/daemon/abandoned_mount_watcher.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cudafs {

namespace {

// The watcher's whole life; async-signal-safe calls only, since it is
// forked from a process that may run other threads.
[[noreturn]] void Watch(int lifeline, int max_fd, const char* mountpoint) {
  // Off the daemon's session, so that a terminal's signals do not reach it;
  // the stop signals stay blocked, as the daemon blocked them. Off the
  // directory cudafs was started in, which it would keep busy.
  setsid();
  prctl(PR_SET_NAME, "cudafs-unmount");
  (void)!chdir("/");
  // Nothing of the daemon's may stay open here: a copy of /dev/fuse (or of
  // an io_uring ring) would keep the dead mount's connection alive, one of
  // the caller's pipes would keep the caller waiting.
  for (int fd = 0; fd < lifeline; ++fd) close(fd);
  if (close_range(lifeline + 1, ~0U, 0) != 0) {
    for (int fd = lifeline + 1; fd < max_fd; ++fd) close(fd);
  }
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
  rlimit files = {};
  const int max_fd = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < 1 << 20
                         ? static_cast<int>(files.rlim_cur)
                         : 1 << 20;
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
    Watch(fds[0], max_fd, mountpoint.c_str());
  }
  close(fds[0]);
  // fds[1] stays open, unused, until the daemon exits: that is the signal.
  return absl::OkStatus();
}

}  // namespace cudafs
