/* The wire format between the cudafs daemon's share service (fs/share) and
 * its clients (fs/client): fixed-size messages over a Unix stream socket,
 * descriptors passed with SCM_RIGHTS. Host byte order: both ends run on one
 * machine.
 *
 *   client -> daemon  cudafs_share_request (op CUDAFS_SHARE_MAP), with
 *                     the file's descriptor
 *   daemon -> client  cudafs_share_reply; when error == 0, then as many
 *                     cudafs_share_pieces as it takes to carry `pieces`
 *                     descriptors, CUDAFS_SHARE_BATCH at a time
 *   client -> daemon  cudafs_share_request with op CUDAFS_SHARE_IMPORTED
 *                     once the pieces are imported: the daemon then lets
 *                     go of its own handles (closing the socket does too)
 *
 * or, after writing through a shared mapping:
 *   client -> daemon  cudafs_share_request (op CUDAFS_SHARE_SYNC), with a
 *                     descriptor of the file open for reading and writing
 *   daemon -> client  cudafs_share_reply, no pieces
 *
 * The daemon names the socket in the mount root's attribute
 * CUDAFS_SOCKET_ATTRIBUTE: "@NAME", an abstract socket address. Both ends
 * send and receive with cudafs_share_send and cudafs_share_receive. */
#ifndef CUDAFS_FS_CLIENT_PROTOCOL_H_
#define CUDAFS_FS_CLIENT_PROTOCOL_H_

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define CUDAFS_SOCKET_ATTRIBUTE "user.cudafs.socket"
#define CUDAFS_SHARE_MAGIC 0x33534643u /* "CFS3" */
#define CUDAFS_SHARE_BATCH 64 /* descriptors per message */
#define CUDAFS_SHARE_MAX_GPUS 16 /* GPUs one mapping's pieces lie on */

enum cudafs_share_op {
  CUDAFS_SHARE_MAP = 1,      /* map the descriptor's file */
  CUDAFS_SHARE_IMPORTED = 2, /* the pieces of the last reply are imported */
  CUDAFS_SHARE_SYNC = 3,     /* the file was written through a mapping */
};

enum cudafs_share_flags {
  /* A shared, writable mapping of the file's own memory (needs a
   * descriptor open for reading and writing); without it, a private copy
   * (needs one open for reading). */
  CUDAFS_SHARE_WRITABLE = 1u << 0,
};

enum cudafs_share_kind {
  CUDAFS_SHARE_HOST = 1, /* memfds: mmap them */
  CUDAFS_SHARE_CUDA = 2, /* CUDA allocations as POSIX file descriptors */
};

struct cudafs_share_request {
  uint32_t magic;
  uint32_t op;
  uint32_t flags;
  uint32_t reserved;
};

struct cudafs_share_reply {
  uint32_t magic;
  int32_t error;    /* 0, or an errno */
  uint32_t kind;    /* cudafs_share_kind */
  uint32_t gpus;    /* entries of pci_bus_id in use (CUDA), else 0 */
  uint64_t size;    /* bytes of the file */
  uint32_t pieces;  /* descriptors that follow, in cudafs_share_pieces */
  uint32_t reserved;
  /* The GPUs holding the pieces, by PCI bus id: the client's numbering of
   * GPUs may differ (CUDA_VISIBLE_DEVICES), bus ids do not. */
  char pci_bus_id[CUDAFS_SHARE_MAX_GPUS][32];
  char message[256]; /* why, when error != 0 */
};

/* The next `count` pieces, in order, with as many descriptors: mapped back
 * to back after those before. */
struct cudafs_share_pieces {
  uint32_t magic;
  uint32_t count;
  uint64_t piece_size[CUDAFS_SHARE_BATCH];
  uint8_t piece_gpu[CUDAFS_SHARE_BATCH]; /* index into the reply's pci_bus_id */
};

/* Sends `size` bytes of `message` with `count` descriptors (SCM_RIGHTS).
 * Returns what sendmsg(2) returns. */
static inline ssize_t cudafs_share_send(int socket, const void* message, size_t size,
                                        const int* fds, size_t count) {
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int) * CUDAFS_SHARE_BATCH)];
  } control;
  struct iovec io = {(void*)message, size};
  struct msghdr header;
  memset(&header, 0, sizeof header);
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  if (count > 0 && count <= CUDAFS_SHARE_BATCH) {
    header.msg_control = control.bytes;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr* c = CMSG_FIRSTHDR(&header);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  return sendmsg(socket, &header, MSG_NOSIGNAL);
}

/* Receives `size` bytes into `message` and up to `max` descriptors into
 * `fds` (close-on-exec), their number into `*count`; descriptors beyond
 * `max` are closed and make it fail. Returns the bytes received, or -1. */
static inline ssize_t cudafs_share_receive(int socket, void* message, size_t size, int* fds,
                                           size_t max, size_t* count) {
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int) * CUDAFS_SHARE_BATCH)];
  } control;
  struct iovec io = {message, size};
  struct msghdr header;
  memset(&header, 0, sizeof header);
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control.bytes;
  header.msg_controllen = sizeof control.bytes;
  const ssize_t got = recvmsg(socket, &header, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  *count = 0;
  int excess = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&header); c != NULL; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*count < max) {
        fds[(*count)++] = fd;
      } else {
        close(fd);
        excess = 1;
      }
    }
  }
  if (excess || (header.msg_flags & MSG_CTRUNC)) {
    for (size_t i = 0; i < *count; ++i) close(fds[i]);
    *count = 0;
    return -1;
  }
  return got;
}

#endif /* CUDAFS_FS_CLIENT_PROTOCOL_H_ */
