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
// as the daemon is going away). The workers are interrupted with SIGUSR2,
// whose handler does nothing.
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

// Serves `session`, mounted on `mountpoint`, with `threads` workers until it
// ends, then unmounts it. Each worker receives into a buffer for requests
// of up to `max_request` bytes (FuseSettings::max_request, which Init asks
// for as max_write). Returns 0, or -errno when the loop failed.
int RunSessionLoop(fuse_session* session, const std::string& mountpoint, Device& device,
                   int threads, size_t max_request);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_SESSION_LOOP_H_
