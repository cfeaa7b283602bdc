// The client's side of the share protocol (fs/wire/share_protocol.h):
// connecting to the daemon of a file's mount, asking, and reading what it
// answers, checked, since the bytes come from another process. Every call
// returns 0 or a negative errno, with why in client_error.h.
#ifndef CUDAFS_FS_CLIENT_SHARE_CONVERSATION_H_
#define CUDAFS_FS_CLIENT_SHARE_CONVERSATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fs/wire/share_protocol.h"

namespace cudafs::client {

// Connects to the share socket named by the root attribute of the mount
// at `mountpoint`: -EXDEV when it names none.
int Connect(const std::string& mountpoint, int* connection);

// Connects to the share socket of the mount holding open file `fd`.
int ConnectFor(int fd, std::string* mountpoint, int* connection);

// The daemon's reply; a refusal it sent becomes the error. A daemon of
// another protocol version refuses in a reply whose layout up to the
// message is every version's.
int ReceiveReply(int connection, ShareReply* reply);

// Sends a request, then receives the reply (into `reply`). A daemon that
// turned the connection away may have closed it before the request went:
// its reply, already here, says why.
int Ask(int connection, uint32_t op, uint32_t flags, uint64_t memory_bytes,
        const std::vector<int>& fds, ShareReply* reply);

// Connects to the daemon of the mount holding `file` and asks `op` for it
// (`*connection` then open, even on failure, or -1). A daemon with too
// many requests at once says so (EAGAIN): asked again, after growing
// pauses, for about two seconds.
int Begin(int file, uint32_t op, uint32_t flags, int* connection, ShareReply* reply);

// The memory a reply hands over: one descriptor and size per piece.
struct Pieces {
  std::vector<int> fds;
  std::vector<uint64_t> sizes;
  std::vector<uint8_t> gpus;  // CUDA: index into the reply's pci_bus_id
  uint64_t total = 0;
};

// The pieces that follow a reply: a shared mapping's, each with its
// descriptor, or the pieces of memory a copy asks for (`plan`), with none.
// -EIO for a list that is not what the reply announced; the descriptors
// received are the caller's to close either way.
int ReceivePieces(int connection, const ShareReply& reply, bool plan, Pieces* pieces);

// Tells the daemon the pieces of a shared mapping are imported, so that
// it lets go of its own handles.
void SendImported(int connection);

}  // namespace cudafs::client

#endif  // CUDAFS_FS_CLIENT_SHARE_CONVERSATION_H_
