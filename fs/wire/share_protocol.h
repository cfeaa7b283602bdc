// The share service's wire format, spoken by the daemon (fs/share) and the
// client library (fs/client) alone: fixed-size messages over a Unix stream
// socket, descriptors passed with SCM_RIGHTS, host byte order (both ends
// run on one machine). Private to cudafs: programs use fs/client/cudafs.h.
//
// A private copy (the caller pays for it with memory of its own):
//   client -> daemon  ShareRequest kMap, with the file's descriptor
//   daemon -> client  ShareReply with kReplyProvideMemory: the kind of
//                     memory, `size` (the file's), `pieces` of memory to
//                     bring and their sum `memory_bytes`; then one
//                     SharePieces with each piece's length and GPU, and no
//                     descriptors
//   client -> daemon  ShareRequest kFill, `memory_bytes` as asked, with a
//                     descriptor per piece, in order (a memfd whose pages
//                     the client allocated; a CUDA allocation exported as a
//                     POSIX descriptor, on the GPU named)
//   daemon -> client  ShareReply: the first `size` bytes of the file are in
//                     the pieces, mapped back to back
// A shared mapping of the file's own memory:
//   client -> daemon  ShareRequest kMap with kWritable, with a descriptor
//                     of the file open for reading and writing
//   daemon -> client  ShareReply, then as many SharePieces as it takes to
//                     carry `pieces` descriptors, kShareBatch at a time
//   client -> daemon  ShareRequest kImported once the pieces are imported:
//                     the daemon then lets go of its own handles
// After writing through a shared mapping:
//   client -> daemon  ShareRequest kSync, with a descriptor of the file
//                     open for reading and writing
//   daemon -> client  ShareReply, no pieces
// Making room on the GPUs (cudafs_make_room: the CLI, Python, and a GPU
// program whose allocation failed):
//   client -> daemon  ShareRequest kMakeRoom, `memory_bytes` to make free
//                     (or kShareRoomAll), on the GPU `gpu` names (or on
//                     each of the mount's), no descriptor
//   daemon -> client  ShareReply once the room is there, or why not
//
// Versions: the magic's last byte is the version's digit. The reply's
// layout up to `message` is the same in every version since 3, so a daemon
// refuses a client of another version in words that client can show.
#ifndef CUDAFS_FS_WIRE_SHARE_PROTOCOL_H_
#define CUDAFS_FS_WIRE_SHARE_PROTOCOL_H_

#include <cstdint>

namespace cudafs {

// The mount root's attribute naming the socket: "@NAME", an abstract
// socket address.
inline constexpr char kShareSocketAttribute[] = "user.cudafs.socket";

inline constexpr uint32_t kShareVersion = 5;
inline constexpr uint32_t kShareBatch = 64;    // descriptors per SharePieces
inline constexpr uint32_t kShareMaxGpus = 16;  // GPUs one mapping's pieces lie on

// "CFS" and the version's digit, in host byte order.
constexpr uint32_t ShareMagic(uint32_t version) { return 0x00534643u | ((0x30u + version) << 24); }
// The version a magic announces, or 0 when it is no cudafs magic.
constexpr uint32_t ShareVersionOf(uint32_t magic) {
  return (magic & 0x00ffffffu) == 0x00534643u && (magic >> 24) >= 0x31u && (magic >> 24) <= 0x39u
             ? (magic >> 24) - 0x30u
             : 0;
}

enum ShareOp : uint32_t {
  kShareMap = 1,       // map the descriptor's file
  kShareImported = 2,  // the pieces of the last reply are imported
  kShareSync = 3,      // the file was written through a mapping
  kShareFill = 4,      // here is the memory for the copy
  kShareMakeRoom = 5,  // make room on the GPUs
};

enum ShareRequestFlags : uint32_t {
  // kMap: a shared, writable mapping of the file's own memory; without it,
  // a private copy.
  kShareWritable = 1u << 0,
  // kMakeRoom: every byte that can move, not `memory_bytes`.
  kShareRoomAll = 1u << 1,
  // kMakeRoom: then hold the room (nothing comes back for a while, new
  // data goes to host memory first).
  kShareRoomHold = 1u << 2,
};
inline constexpr uint32_t kShareMapFlags = kShareWritable;
inline constexpr uint32_t kShareRoomFlags = kShareRoomAll | kShareRoomHold;

enum ShareMemoryKind : uint32_t {
  kShareHost = 1,  // memfds
  kShareCuda = 2,  // CUDA allocations as POSIX file descriptors
};

enum ShareReplyFlags : uint32_t {
  // Answer with kFill and the pieces of memory the SharePieces after name.
  kReplyProvideMemory = 1u << 0,
};

struct ShareRequest {
  uint32_t magic;
  uint32_t op;
  uint32_t flags;
  uint32_t reserved;      // 0
  uint64_t memory_bytes;  // kFill: bytes of the pieces sent; kMakeRoom: to make free; else 0
  // kMakeRoom: the GPU, by PCI bus id ("0000:65:00.0", NUL-terminated),
  // or empty for each GPU of the mount; else empty.
  char gpu[32];
};

struct ShareReply {
  uint32_t magic;
  int32_t error;    // 0, or an errno
  uint32_t kind;    // ShareMemoryKind
  uint32_t gpus;    // entries of pci_bus_id in use (CUDA), else 0
  uint64_t size;    // bytes of the file (mapped, or copied)
  uint32_t pieces;  // descriptors that follow in SharePieces (a copy: pieces to bring)
  uint32_t flags;   // ShareReplyFlags
  // The GPUs holding the pieces (or to allocate on), by PCI bus id: the
  // client's numbering of GPUs may differ (CUDA_VISIBLE_DEVICES), bus ids
  // do not.
  char pci_bus_id[kShareMaxGpus][32];
  char message[256];      // why, when error != 0
  uint64_t memory_bytes;  // kReplyProvideMemory: the pieces' sum
};

// The next `count` pieces, in order, with as many descriptors (none for a
// copy's plan): mapped back to back after those before.
struct SharePieces {
  uint32_t magic;
  uint32_t count;
  uint64_t piece_size[kShareBatch];
  uint8_t piece_gpu[kShareBatch];  // index into the reply's pci_bus_id
};

}  // namespace cudafs

#endif  // CUDAFS_FS_WIRE_SHARE_PROTOCOL_H_
