// Without -f the cudafs command forks before touching the device (a CUDA
// context does not survive fork) and the parent waits on a pipe until the
// child has mounted or failed, so `cudafs DIR` returns only once DIR is
// usable and exits 2 with the child's one-line message when it is not.
#ifndef CUDAFS_FS_DAEMON_DAEMONIZE_H_
#define CUDAFS_FS_DAEMON_DAEMONIZE_H_

#include <string>

namespace cudafs {

// Tells the waiting parent how the mount went (the exit status it should
// return), once.
class ReadyPipe {
 public:
  // `fd`: the pipe's write end, or -1 in the foreground (no one waits).
  explicit ReadyPipe(int fd) : fd_(fd) {}
  void Send(unsigned char exit_status);

 private:
  int fd_;
};

// Forks; the parent waits for the child's verdict and exits with it. Returns
// the write end of the pipe in the child, which leads a session of its own.
int Daemonize();

// Takes the daemon off the terminal and pipes of whoever ran cudafs: its
// directory becomes /, stdio /dev/null, and its log syslog (tagged with
// `mountpoint`).
void Detach(const std::string& mountpoint);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_DAEMONIZE_H_
