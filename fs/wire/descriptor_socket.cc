#include "fs/wire/descriptor_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cudafs {
namespace {

union Control {
  cmsghdr align;
  char bytes[CMSG_SPACE(sizeof(int) * kMaxDescriptorsTheKernelPasses)];
};

}  // namespace

ssize_t SendWithDescriptors(int socket, const void* message, size_t size, const int* fds,
                            size_t count, int flags) {
  if (count > kMaxDescriptorsPerMessage) {
    errno = EINVAL;
    return -1;
  }
  Control control;
  iovec io = {const_cast<void*>(message), size};
  msghdr header = {};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  if (count > 0) {
    header.msg_control = control.bytes;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* c = CMSG_FIRSTHDR(&header);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  return sendmsg(socket, &header, flags | MSG_NOSIGNAL);
}

ssize_t ReceiveKeepingDescriptors(int socket, void* buffer, size_t size, int flags,
                                  std::vector<int>* fds, bool* truncated) {
  Control control;
  iovec io = {buffer, size};
  msghdr header = {};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control.bytes;
  header.msg_controllen = sizeof control.bytes;
  const ssize_t got = recvmsg(socket, &header, flags | MSG_CMSG_CLOEXEC);
  if (got < 0) return got;
  *truncated = (header.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds->push_back(fd);
    }
  }
  return got;
}

ssize_t ReceiveWithDescriptors(int socket, void* buffer, size_t size, int flags, size_t max,
                               std::vector<int>* fds, bool* refused) {
  const size_t before = fds->size();
  bool excess = false;
  const ssize_t got = ReceiveKeepingDescriptors(socket, buffer, size, flags, fds, &excess);
  if (got < 0) return got;
  if (fds->size() > max) excess = true;
  if (excess) {
    for (size_t i = before; i < fds->size(); ++i) close((*fds)[i]);
    fds->resize(before);
    *refused = true;
  }
  return got;
}

}  // namespace cudafs
