#include "fs/daemon/daemonize.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "alloc/base/log.h"

namespace cudafs {
namespace {

void DetachStdio() {
  const int null = open("/dev/null", O_RDWR);
  if (null < 0) return;
  dup2(null, STDIN_FILENO);
  dup2(null, STDOUT_FILENO);
  dup2(null, STDERR_FILENO);
  if (null > STDERR_FILENO) close(null);
}

}  // namespace

void ReadyPipe::Send(unsigned char exit_status) {
  if (fd_ < 0) return;
  (void)!write(fd_, &exit_status, 1);
  close(fd_);
  fd_ = -1;
}

int Daemonize() {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("cudafs: pipe");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("cudafs: fork");
    std::exit(1);
  }
  if (pid > 0) {
    close(fds[1]);
    unsigned char status;
    ssize_t got;
    do {
      got = read(fds[0], &status, 1);
    } while (got < 0 && errno == EINTR);
    // No byte: the child died before it could say.
    std::exit(got == 1 ? status : 1);
  }
  close(fds[0]);
  setsid();
  return fds[1];
}

void Detach(const std::string& mountpoint) {
  (void)!chdir("/");
  DetachStdio();
  LogToSyslog(mountpoint);
}

}  // namespace cudafs
