// Sockets whose last close waits: loopback TCP connections over a full
// send queue that their peer never reads, with SO_LINGER. What another
// user sends to make a close of ours wait, as a file of a FUSE server that
// never answers FLUSH does.
#ifndef CUDAFS_TESTS_SUPPORT_LINGERING_SOCKETS_H_
#define CUDAFS_TESTS_SUPPORT_LINGERING_SOCKETS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace cudafs_test {

class LingeringSockets {
 public:
  LingeringSockets() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    address_.sin_family = AF_INET;
    address_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address_;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address_), sizeof address_) != 0 ||
        listen(listener_, 64) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address_), &length) != 0) {
      close(listener_);
      listener_ = -1;
    }
  }
  // The peers close: the lingering ends.
  ~LingeringSockets() {
    for (int peer : never_read_) close(peer);
    if (listener_ >= 0) close(listener_);
  }
  LingeringSockets(const LingeringSockets&) = delete;
  LingeringSockets& operator=(const LingeringSockets&) = delete;

  // A socket whose last close lingers up to `seconds`, or -1.
  int Make(int seconds) {
    if (listener_ < 0) return -1;
    const int lingering = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    connect(lingering, reinterpret_cast<sockaddr*>(&address_), sizeof address_);
    pollfd connected = {lingering, POLLOUT, 0};
    if (poll(&connected, 1, 1000) != 1) {
      close(lingering);
      return -1;
    }
    never_read_.push_back(accept(listener_, nullptr, nullptr));
    const std::string chunk(65536, 'x');
    while (write(lingering, chunk.data(), chunk.size()) > 0) {
    }
    const linger wait = {1, seconds};
    if (setsockopt(lingering, SOL_SOCKET, SO_LINGER, &wait, sizeof wait) != 0) {
      close(lingering);
      return -1;
    }
    return lingering;
  }

  // Closes `lingering` without lingering, where its last reference is ours
  // (it was not taken by whom it was sent to).
  static void CloseAtOnce(int lingering) {
    const linger abort = {1, 0};
    setsockopt(lingering, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    close(lingering);
  }

 private:
  int listener_ = -1;
  sockaddr_in address_ = {};
  std::vector<int> never_read_;
};

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_LINGERING_SOCKETS_H_
