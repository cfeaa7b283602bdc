// Messages with descriptors over a Unix stream socket (SCM_RIGHTS), for
// both ends of the share service. Standalone (libc): the client library
// links it too.
#ifndef CUDAFS_FS_WIRE_DESCRIPTOR_SOCKET_H_
#define CUDAFS_FS_WIRE_DESCRIPTOR_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <vector>

namespace cudafs {

// The most descriptors one message carries.
inline constexpr size_t kMaxDescriptorsPerMessage = 64;

// Sends `size` bytes of `message` with `fds` (at most
// kMaxDescriptorsPerMessage); `flags` as sendmsg's (MSG_NOSIGNAL is always
// added). Returns what sendmsg(2) returns.
ssize_t SendWithDescriptors(int socket, const void* message, size_t size, const int* fds,
                            size_t count, int flags);

// Receives up to `size` bytes into `buffer`, appending the descriptors
// that came with them to `fds` (close-on-exec); `flags` as recvmsg's.
// Returns what recvmsg(2) returns. Descriptors past `max` in all, or
// control data the kernel truncated (the receiver out of descriptors),
// set `*refused`: then every descriptor of this call is closed.
ssize_t ReceiveWithDescriptors(int socket, void* buffer, size_t size, int flags, size_t max,
                               std::vector<int>* fds, bool* refused);

// The most descriptors the kernel passes with one message (SCM_MAX_FD).
inline constexpr size_t kMaxDescriptorsTheKernelPasses = 253;

// As ReceiveWithDescriptors, but closing none: every descriptor that came
// is appended to `fds`, for a server to close where the close cannot hold
// it up (a peer's descriptor may be a socket that lingers on close, or a
// file of a FUSE filesystem that never answers). Room is made for as many
// as the kernel passes, so that it drops none, which would close them on
// this thread; `*truncated` says it dropped some all the same (this
// process out of descriptors).
ssize_t ReceiveKeepingDescriptors(int socket, void* buffer, size_t size, int flags,
                                  std::vector<int>* fds, bool* truncated);

}  // namespace cudafs

#endif  // CUDAFS_FS_WIRE_DESCRIPTOR_SOCKET_H_
