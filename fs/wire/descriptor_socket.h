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

}  // namespace cudafs

#endif  // CUDAFS_FS_WIRE_DESCRIPTOR_SOCKET_H_
