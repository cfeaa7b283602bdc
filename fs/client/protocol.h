/* The wire format between the cudafs daemon's share service (fs/share) and
 * its clients (fs/client): fixed-size messages over a Unix stream socket,
 * descriptors passed with SCM_RIGHTS. Host byte order: both ends run on one
 * machine.
 *
 *   client -> daemon  cudafs_share_request, with the file's descriptor
 *   daemon -> client  cudafs_share_reply, with one descriptor per piece
 *                     (none when error != 0)
 *   client -> daemon  cudafs_share_request with op CUDAFS_SHARE_IMPORTED
 *                     once the pieces are imported: the daemon then lets
 *                     go of its own handles (closing the socket does too)
 *
 * The daemon names the socket in the mount root's attribute
 * CUDAFS_SOCKET_ATTRIBUTE: "@NAME", an abstract socket address. */
#ifndef CUDAFS_FS_CLIENT_PROTOCOL_H_
#define CUDAFS_FS_CLIENT_PROTOCOL_H_

#include <stdint.h>

#define CUDAFS_SOCKET_ATTRIBUTE "user.cudafs.socket"
#define CUDAFS_SHARE_MAGIC 0x31534643u /* "CFS1" */
#define CUDAFS_SHARE_MAX_PIECES 64

enum cudafs_share_op {
  CUDAFS_SHARE_MAP = 1,      /* map the descriptor's file */
  CUDAFS_SHARE_IMPORTED = 2, /* the pieces of the last reply are imported */
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
  int32_t device;   /* the GPU's index (CUDA), else -1 */
  uint64_t size;    /* bytes of the file */
  uint32_t pieces;  /* descriptors that come with the reply */
  uint32_t reserved;
  uint64_t piece_size[CUDAFS_SHARE_MAX_PIECES]; /* mapped back to back */
  char message[256]; /* why, when error != 0 */
};

#endif /* CUDAFS_FS_CLIENT_PROTOCOL_H_ */
