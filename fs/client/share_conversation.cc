#include "fs/client/share_conversation.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string_view>

#include "fs/client/client_error.h"
#include "fs/client/mount_table.h"
#include "fs/wire/abstract_address.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs::client {
namespace {

constexpr uint32_t kMagic = ShareMagic(kShareVersion);

// Why a receive that got `got` bytes failed: the bound of BoundReplies
// passed, or a short or refused message (`otherwise`).
int ReceiveFailed(int connection, ssize_t got, int error, const char* otherwise) {
  if (got < 0 && (error == EAGAIN || error == EWOULDBLOCK)) {
    timeval bound = {};
    socklen_t length = sizeof bound;
    getsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &bound, &length);
    return Fail(ETIMEDOUT, "the cudafs daemon did not answer within %ld s",
                static_cast<long>(bound.tv_sec));
  }
  return Fail(EIO, "%s", otherwise);
}

// Receives exactly `size` bytes and up to `max` descriptors (appended to
// `fds`): 0, or an error saying that `what` was not received.
int ReceiveExactly(int connection, void* message, size_t size, size_t max, std::vector<int>* fds,
                   const char* what) {
  bool refused = false;
  const ssize_t got =
      ReceiveWithDescriptors(connection, message, size, MSG_WAITALL, max, fds, &refused);
  if (got == static_cast<ssize_t>(size) && !refused) return 0;
  return ReceiveFailed(connection, got, errno, what);
}

// The socket the root of `mount` names, read through a descriptor of the
// directory at its mountpoint, which must be of the file's `device`
// (another mount over the mountpoint would answer otherwise).
int SocketOf(const CudafsMount& mount, dev_t device, std::string* address) {
  const char* path = mount.mountpoint.c_str();
  const int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Fail(EXDEV, "%s: %s", path, std::strerror(errno));
  struct stat st;
  char name[256];
  ssize_t length = -1;
  int error = EXDEV;
  if (fstat(root, &st) == 0 && st.st_dev == device) {
    length = fgetxattr(root, kShareSocketAttribute, name, sizeof name);
    error = errno;
  }
  close(root);
  if (length < 0 && error == EXDEV) {
    return Fail(EXDEV, "%s is covered by another mount: its daemon cannot be found", path);
  }
  if (length <= 1 || name[0] != '@') {
    return Fail(EXDEV, "%s offers no sharing (%s)", path,
                length < 0 ? std::strerror(error) : "no socket named");
  }
  address->assign(name, static_cast<size_t>(length));
  return 0;
}

}  // namespace

int ReplyBoundSeconds(uint64_t bytes) {
  constexpr uint64_t kFloorSeconds = 30;
  constexpr uint64_t kSlowBytesPerSecond = uint64_t{128} << 20;
  return static_cast<int>(std::min<uint64_t>(kFloorSeconds + bytes / kSlowBytesPerSecond, INT_MAX));
}

int BoundReplies(int connection, int seconds) {
  const timeval bound = {seconds, 0};
  if (setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound) != 0) {
    return Fail(errno, "setsockopt SO_RCVTIMEO: %s", std::strerror(errno));
  }
  return 0;
}

int ConnectTo(const std::string& address, uid_t owner, int* connection) {
  const std::optional<AbstractAddress> socket_address =
      address.starts_with('@') ? AbstractAddress::Of(std::string_view(address).substr(1))
                               : std::nullopt;
  if (!socket_address) {
    return Fail(EXDEV, "%s is no abstract socket address", address.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(errno, "socket: %s", std::strerror(errno));
  ucred peer = {};
  socklen_t length = sizeof peer;
  int result = 0;
  if (connect(fd, socket_address->get(), socket_address->length) != 0) {
    result = Fail(EIO, "cannot reach the cudafs daemon at %s: %s", address.c_str(),
                  std::strerror(errno));
  } else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    result = Fail(EIO, "SO_PEERCRED: %s", std::strerror(errno));
  } else if (peer.uid != owner && peer.uid != 0) {
    result = Fail(EPERM,
                  "%s is served by uid %u, not by the mount's owner (uid %u) or root: not its "
                  "daemon, so nothing was sent",
                  address.c_str(), static_cast<unsigned>(peer.uid), static_cast<unsigned>(owner));
  } else {
    result = BoundReplies(fd, ReplyBoundSeconds(0));
  }
  if (result != 0) {
    close(fd);
    return result;
  }
  *connection = fd;
  return 0;
}

int ConnectToMount(const CudafsMount& mount, int* connection) {
  std::string address;
  if (int r = SocketOf(mount, mount.device, &address); r != 0) return r;
  return ConnectTo(address, mount.owner, connection);
}

int ConnectFor(int fd, int* connection) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Fail(errno, "fstat: %s", std::strerror(errno));
  CudafsMount mount;
  if (int r = FindCudafsMount(st.st_dev, &mount); r != 0) return r;
  if (int r = ConnectToMount(mount, connection); r != 0) return r;
  const int r = BoundReplies(*connection, ReplyBoundSeconds(static_cast<uint64_t>(st.st_size)));
  if (r != 0) {
    close(*connection);
    *connection = -1;
  }
  return r;
}

int ReceiveReply(int connection, ShareReply* reply) {
  std::vector<int> none;
  bool refused = false;
  *reply = {};
  const ssize_t got =
      ReceiveWithDescriptors(connection, reply, sizeof *reply, MSG_WAITALL, 0, &none, &refused);
  if (got < 0)
    return ReceiveFailed(connection, got, errno, "the cudafs daemon sent no valid reply");
  const uint32_t version = got >= 4 ? ShareVersionOf(reply->magic) : 0;
  const bool framed = got == static_cast<ssize_t>(sizeof *reply) ||
                      (version != 0 && version != kShareVersion &&
                       got >= static_cast<ssize_t>(offsetof(ShareReply, memory_bytes)));
  if (!framed || version == 0) return Fail(EIO, "the cudafs daemon sent no valid reply");
  reply->message[sizeof reply->message - 1] = '\0';
  for (auto& bus_id : reply->pci_bus_id) bus_id[sizeof bus_id - 1] = '\0';
  if (version != kShareVersion) {
    if (reply->error != 0) return Fail(reply->error, "%s", reply->message);
    return Fail(EPROTONOSUPPORT,
                "the cudafs daemon speaks share protocol %u, this library %u: use the client "
                "library of the cudafs that mounted",
                version, kShareVersion);
  }
  if (reply->error != 0) return Fail(reply->error, "%s", reply->message);
  if (reply->gpus > kShareMaxGpus) {
    return Fail(EIO, "the cudafs daemon named too many GPUs");
  }
  return 0;
}

int Ask(int connection, uint32_t op, uint32_t flags, uint64_t memory_bytes,
        const std::vector<int>& fds, ShareReply* reply) {
  ShareRequest request = {};
  request.op = op;
  request.flags = flags;
  request.memory_bytes = memory_bytes;
  return Ask(connection, request, fds, reply);
}

int Ask(int connection, ShareRequest request, const std::vector<int>& fds, ShareReply* reply) {
  request.magic = kMagic;
  const ssize_t sent =
      SendWithDescriptors(connection, &request, sizeof request, fds.data(), fds.size(), 0);
  const int error = errno;
  const int received = ReceiveReply(connection, reply);
  if (sent != static_cast<ssize_t>(sizeof request) && received == -EIO) {
    return Fail(EIO, "cannot send to the cudafs daemon: %s", std::strerror(error));
  }
  return received;
}

int Begin(int file, uint32_t op, uint32_t flags, int* connection, ShareReply* reply) {
  useconds_t pause = 1000;
  for (int attempt = 0;; ++attempt) {
    if (int r = ConnectFor(file, connection); r != 0) return r;
    const int result = Ask(*connection, op, flags, 0, {file}, reply);
    if (result != -EAGAIN || attempt == 12) return result;
    close(*connection);
    *connection = -1;
    usleep(pause);
    pause = std::min<useconds_t>(pause * 2, 250'000);
  }
}

int ReceivePieces(int connection, const ShareReply& reply, bool plan, Pieces* pieces) {
  while (pieces->sizes.size() < reply.pieces) {
    SharePieces batch;
    const size_t before = pieces->fds.size();
    const char* malformed = "the cudafs daemon sent a malformed list of pieces";
    if (int r = ReceiveExactly(connection, &batch, sizeof batch, plan ? 0 : before + kShareBatch,
                               &pieces->fds, malformed);
        r != 0) {
      return r;
    }
    const size_t count = plan ? batch.count : pieces->fds.size() - before;
    if (batch.magic != kMagic || count == 0 || batch.count != count || count > kShareBatch ||
        pieces->sizes.size() + count > reply.pieces) {
      return Fail(EIO, "%s", malformed);
    }
    for (size_t i = 0; i < count; ++i) {
      if (reply.kind == kShareCuda && batch.piece_gpu[i] >= reply.gpus) {
        return Fail(EIO, "the cudafs daemon sent a piece of an unnamed GPU");
      }
      pieces->sizes.push_back(batch.piece_size[i]);
      pieces->gpus.push_back(batch.piece_gpu[i]);
      pieces->total += batch.piece_size[i];
    }
  }
  return 0;
}

void SendImported(int connection) {
  ShareRequest imported = {};
  imported.magic = kMagic;
  imported.op = kShareImported;
  (void)SendWithDescriptors(connection, &imported, sizeof imported, nullptr, 0, 0);
}

}  // namespace cudafs::client
