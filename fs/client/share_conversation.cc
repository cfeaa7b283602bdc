#include "fs/client/share_conversation.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "fs/client/client_error.h"
#include "fs/client/mount_table.h"
#include "fs/wire/descriptor_socket.h"

namespace cudafs::client {
namespace {

constexpr uint32_t kMagic = ShareMagic(kShareVersion);

// Receives exactly `size` bytes and up to `max` descriptors (appended to
// `fds`); false on anything else.
bool ReceiveExactly(int connection, void* message, size_t size, size_t max, std::vector<int>* fds) {
  bool refused = false;
  const ssize_t got =
      ReceiveWithDescriptors(connection, message, size, MSG_WAITALL, max, fds, &refused);
  return got == static_cast<ssize_t>(size) && !refused;
}

}  // namespace

int Connect(const std::string& mountpoint, int* connection) {
  char name[256];
  const ssize_t length = getxattr(mountpoint.c_str(), kShareSocketAttribute, name, sizeof name);
  if (length <= 1 || name[0] != '@') {
    return Fail(EXDEV, "%s offers no sharing (%s)", mountpoint.c_str(),
                length < 0 ? std::strerror(errno) : "no socket named");
  }
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  const size_t bytes =
      std::min<size_t>(static_cast<size_t>(length) - 1, sizeof address.sun_path - 1);
  std::memcpy(address.sun_path + 1, name + 1, bytes);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(errno, "socket: %s", std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address),
              static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + bytes)) != 0) {
    const int error = errno;
    close(fd);
    return Fail(EIO, "cannot reach the cudafs daemon of %s: %s", mountpoint.c_str(),
                std::strerror(error));
  }
  *connection = fd;
  return 0;
}

int ConnectFor(int fd, std::string* mountpoint, int* connection) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Fail(errno, "fstat: %s", std::strerror(errno));
  if (int r = FindCudafsMount(st.st_dev, mountpoint); r != 0) return r;
  return Connect(*mountpoint, connection);
}

int ReceiveReply(int connection, ShareReply* reply) {
  std::vector<int> none;
  bool refused = false;
  *reply = {};
  const ssize_t got =
      ReceiveWithDescriptors(connection, reply, sizeof *reply, MSG_WAITALL, 0, &none, &refused);
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
  const ShareRequest request = {kMagic, op, flags, 0, memory_bytes};
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
  std::string mountpoint;
  useconds_t pause = 1000;
  for (int attempt = 0;; ++attempt) {
    if (int r = ConnectFor(file, &mountpoint, connection); r != 0) return r;
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
    const bool whole = ReceiveExactly(connection, &batch, sizeof batch,
                                      plan ? 0 : before + kShareBatch, &pieces->fds);
    const size_t count = plan ? batch.count : pieces->fds.size() - before;
    if (!whole || batch.magic != kMagic || count == 0 || batch.count != count ||
        count > kShareBatch || pieces->sizes.size() + count > reply.pieces) {
      return Fail(EIO, "the cudafs daemon sent a malformed list of pieces");
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
  const ShareRequest imported = {kMagic, kShareImported, 0, 0, 0};
  (void)SendWithDescriptors(connection, &imported, sizeof imported, nullptr, 0, 0);
}

}  // namespace cudafs::client
