// The client's side of the share protocol (fs/wire/share_protocol.h):
// connecting to the daemon of a file's mount, asking, and reading what it
// answers, checked, since the bytes come from another process. Every call
// returns 0 or a negative errno, with why in client_error.h.
#ifndef CUDAFS_FS_CLIENT_SHARE_CONVERSATION_H_
#define CUDAFS_FS_CLIENT_SHARE_CONVERSATION_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fs/client/mount_table.h"
#include "fs/wire/share_protocol.h"

namespace cudafs::client {

// The longest wait for one reply of the daemon about `bytes` (of the
// file asked for, or of a copy's memory): 30 s, for a daemon busy with
// other requests, plus the bytes at 128 MiB/s, for moving or copying them
// (about an eighth of the slowest rate measured, host memory committed
// fresh at 1 GB/s): 10 GiB gets 110 s.
int ReplyBoundSeconds(uint64_t bytes);

// Waits for each reply on `connection` at most `seconds` (SO_RCVTIMEO):
// past that, ReceiveReply and ReceivePieces fail with -ETIMEDOUT, saying
// so, rather than hang on a daemon that accepted and does not answer.
int BoundReplies(int connection, int seconds);

// Connects to the abstract socket `address` ("@NAME") of the daemon of a
// mount that `owner` mounted. Anyone may listen on any free name, so the
// listener must run as `owner` or root (SO_PEERCRED), else -EPERM, and
// nothing is sent. Each reply is then awaited ReplyBoundSeconds(0) at
// most.
int ConnectTo(const std::string& address, uid_t owner, int* connection);

// Connects to the daemon of `mount` (mount_table.h), through the socket
// its root names (-EXDEV when none, or when another mount covers it).
int ConnectToMount(const CudafsMount& mount, int* connection);

// Connects to the daemon of the mount holding open file `fd` (the socket
// named at the root of the mount, mount_table.h), waiting for each reply
// at most ReplyBoundSeconds(the file's size): -EXDEV when there is none.
int ConnectFor(int fd, int* connection);

// The daemon's reply; a refusal it sent becomes the error. A daemon of
// another protocol version refuses in a reply whose layout up to the
// message is every version's.
int ReceiveReply(int connection, ShareReply* reply);

// Sends a request, then receives the reply (into `reply`). A daemon that
// turned the connection away may have closed it before the request went:
// its reply, already here, says why.
int Ask(int connection, uint32_t op, uint32_t flags, uint64_t memory_bytes,
        const std::vector<int>& fds, ShareReply* reply);
// The same for a whole `request` (its magic set here).
int Ask(int connection, ShareRequest request, const std::vector<int>& fds, ShareReply* reply);

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
