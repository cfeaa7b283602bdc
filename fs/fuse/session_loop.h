// RunSessionLoop: serves a mounted FUSE session with a fixed pool of worker
// threads, each receiving requests into its own buffer from the Device.
//
// Why not fuse_session_loop_mt: libfuse would receive into heap memory,
// and every write would then be copied once more into pinned memory before
// the GPU can DMA it. Receiving straight into device-provided (pinned)
// buffers lets a FUSE_WRITE's payload go to VRAM with one DMA.
//
// Over io_uring (uring=), libfuse's ring threads take the requests instead
// and call the same operations; this loop then serves only what the kernel
// still sends through /dev/fuse (INIT, FORGET, interrupts).
//
// The loop ends when the filesystem is unmounted, or on SIGINT, SIGTERM or
// SIGHUP, which unmount it (files still open on it then fail with ENOTCONN,
// as the daemon is going away), or on SIGUSR1, which asks for the mount to
// be handed to another process (fs/daemon/hand_over.h): the workers then
// stop between requests and the session stays mounted, its requests
// waiting in the kernel for whoever reads them next. The workers are
// interrupted with SIGUSR2, whose handler does nothing.
#ifndef CUDAFS_FS_FUSE_SESSION_LOOP_H_
#define CUDAFS_FS_FUSE_SESSION_LOOP_H_

#include <cstddef>
#include <string>

#include "alloc/devices/device.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, to be called
// before mounting: a stop signal that comes before RunSessionLoop has its
// handlers in place then waits for them instead of killing a daemon whose
// filesystem is mounted. RunSessionLoop unblocks them.
void BlockStopSignals();

// The buffer a worker receives requests into: libfuse reads whole requests
// of up to its session buffer size (max_write plus a 4 KiB header;
// fuse_i.h). Before INIT that size is 256 pages plus the header; with our
// receive-buf-size patch the buffer the INIT request arrives in raises it,
// so that INIT may grant the max_write that Init asks for (max_request).
size_t ReceiveBufferSize(size_t max_request);

// Serves `session`, mounted on `mountpoint`, with `threads` workers until it
// ends, then unmounts it, but for a hand-over. Each worker receives into a
// buffer for requests of up to `max_request` bytes (FuseSettings::
// max_request, which Init asks for as max_write). The INIT request the
// kernel sends is kept in `init_request`, which a successor replays to
// take the session over (hand_over.h). Returns 0 once unmounted,
// kHandOverAsked when a hand-over was asked (the session still mounted;
// call again to go on serving), or -errno when the loop failed.
inline constexpr int kHandOverAsked = 1;
int RunSessionLoop(fuse_session* session, const std::string& mountpoint, Device& device,
                   int threads, size_t max_request, std::string* init_request);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_SESSION_LOOP_H_
