// The share service's protocol spoken by hand, as a client other than the
// library might: for tests that send what the library never would.
#ifndef CUDAFS_TESTS_SUPPORT_RAW_SHARE_CLIENT_H_
#define CUDAFS_TESTS_SUPPORT_RAW_SHARE_CLIENT_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "fs/wire/descriptor_socket.h"
#include "fs/wire/share_protocol.h"

namespace cudafs_test {

// The share socket's address ("@NAME") of the mount at `root`, or "".
inline std::string ShareSocketOf(const std::string& root) {
  char name[256];
  const ssize_t length = getxattr(root.c_str(), cudafs::kShareSocketAttribute, name, sizeof name);
  return length > 1 ? std::string(name, static_cast<size_t>(length)) : "";
}

// A connection to the share socket at `address` ("@NAME"), or -1.
inline int ConnectToShare(const std::string& address) {
  if (address.size() < 2) return -1;
  sockaddr_un where = {};
  where.sun_family = AF_UNIX;
  std::memcpy(where.sun_path + 1, address.data() + 1, address.size() - 1);
  const int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(connection, reinterpret_cast<sockaddr*>(&where),
              static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size())) != 0) {
    close(connection);
    return -1;
  }
  return connection;
}

inline cudafs::ShareRequest MakeShareRequest(uint32_t op, uint32_t flags = 0) {
  return {cudafs::ShareMagic(cudafs::kShareVersion), op, flags, 0, 0, {}};
}

// Sends `size` bytes of `message` with `fd` (if >= 0); false if it failed.
inline bool SendRaw(int connection, const void* message, size_t size, int fd = -1) {
  return cudafs::SendWithDescriptors(connection, message, size, &fd, fd >= 0 ? 1 : 0, 0) ==
         static_cast<ssize_t>(size);
}

// Sends `size` bytes of `message` with all of `fds` in one message, however
// many (SendWithDescriptors stops at kMaxDescriptorsPerMessage); returns
// what sendmsg(2) returns.
inline ssize_t SendWithAnyDescriptors(int connection, const void* message, size_t size,
                                      const std::vector<int>& fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec io = {const_cast<void*>(message), size};
  msghdr header = {};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control.data();
  header.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&header);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  return sendmsg(connection, &header, MSG_NOSIGNAL);
}

// One whole message of type T, waiting for it; the descriptors that came
// with it (at most `max`) appended to `fds`.
template <typename T>
bool ReceiveWhole(int connection, T* message, std::vector<int>* fds, size_t max = 0) {
  bool refused = false;
  return cudafs::ReceiveWithDescriptors(connection, message, sizeof *message, MSG_WAITALL, max,
                                        fds, &refused) == static_cast<ssize_t>(sizeof *message);
}

// The daemon's reply within `timeout_ms`, with the pieces after it (their
// descriptors closed; a copy's plan has none); false when none came whole.
inline bool ReceiveReply(int connection, cudafs::ShareReply* reply, int timeout_ms = 10'000) {
  pollfd ready = {connection, POLLIN, 0};
  if (poll(&ready, 1, timeout_ms) != 1) return false;
  std::vector<int> fds;
  bool refused = false;
  *reply = {};
  if (cudafs::ReceiveWithDescriptors(connection, reply, sizeof *reply, MSG_WAITALL, 0, &fds,
                                     &refused) != static_cast<ssize_t>(sizeof *reply)) {
    return false;
  }
  const bool plan = reply->flags & cudafs::kReplyProvideMemory;
  for (uint32_t received = 0; received < reply->pieces;) {
    cudafs::SharePieces batch;
    fds.clear();
    if (cudafs::ReceiveWithDescriptors(connection, &batch, sizeof batch, MSG_WAITALL,
                                       cudafs::kShareBatch, &fds, &refused) !=
            static_cast<ssize_t>(sizeof batch) ||
        batch.count == 0 || (!plan && fds.size() != batch.count)) {
      return false;
    }
    for (int fd : fds) close(fd);
    received += batch.count;
  }
  return true;
}

// Sends a map request for `fd` to the share socket at `address`: the
// daemon's answer (an errno; 0 for a copy means it asked for memory), or
// a negative number when it gave none.
inline int RawMap(const std::string& address, int fd, uint32_t flags) {
  const int connection = ConnectToShare(address);
  if (connection < 0) return -2;
  const cudafs::ShareRequest request = MakeShareRequest(cudafs::kShareMap, flags);
  cudafs::ShareReply reply;
  const bool sent = SendRaw(connection, &request, sizeof request, fd);
  const bool answered = ReceiveReply(connection, &reply);
  close(connection);
  if (!answered) return sent ? -4 : -3;
  return reply.error;
}

}  // namespace cudafs_test

#endif  // CUDAFS_TESTS_SUPPORT_RAW_SHARE_CLIENT_H_
