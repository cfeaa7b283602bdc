#include "fs/daemon/helper_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace cudafs {

absl::StatusOr<int> StartHelperProcess(const char* name, const std::string& mountpoint,
                                       int type) {
  int fds[2];
  if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat(name, ": socketpair: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawn_file_actions_addchdir_np(&actions, "/");
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  const char* argv[] = {name, mountpoint.c_str(), nullptr};
  const int error = posix_spawn(nullptr, "/proc/self/exe", &actions, &attributes,
                                const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (error != 0) {
    close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot start ", name, " (/proc/self/exe): ", std::strerror(error)));
  }
  char ready;
  ssize_t got;
  do {
    got = recv(fds[0], &ready, 1, 0);
  } while (got < 0 && errno == EINTR);
  if (got != 1) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat(name, " did not start"));
  }
  return fds[0];
}

void HelperRuns(const char* name) {
  // exec named the process after what it ran, /proc/self/exe.
  prctl(PR_SET_NAME, name);
  (void)!send(STDIN_FILENO, "R", 1, MSG_NOSIGNAL);
}

}  // namespace cudafs
