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
#include <functional>
#include <string>

#include "absl/status/status.h"
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

struct SessionLoopSettings {
  int threads = 1;  // workers
  // Each worker receives into a buffer for requests of up to this many
  // bytes (FuseSettings::max_request, which Init asks for as max_write).
  size_t max_request = 0;
  // Where the INIT request the kernel sends is kept, which a successor
  // replays to take the session over (hand_over.h).
  std::string* init_request = nullptr;
  // If set, runs once INIT is answered, on the worker that answered it.
  std::function<void()> after_init;
  // Fault the buffers in before the first read. The kernel fails with EIO
  // a request whose copy into a worker's buffer faults while the worker is
  // being killed (a page fault gives up on a fatal signal); a mount that
  // survives its daemon wants that request sent again instead.
  bool resident_buffers = false;
};

// Serves `session`, mounted on `mountpoint`, until it ends, then unmounts
// it, but for a hand-over. Returns 0 once unmounted,
// kHandOverAsked when a hand-over was asked (the session still mounted;
// call again to go on serving), or -errno when the loop failed.
inline constexpr int kHandOverAsked = 1;
// ... or kPauseAsked after AskForPause: the session still mounted, the
// workers stopped between requests, so that the caller may do what needs
// no request running (a checkpoint of the metadata log), then serve on.
inline constexpr int kPauseAsked = 2;
int RunSessionLoop(fuse_session* session, const std::string& mountpoint, Device& device,
                   const SessionLoopSettings& settings);

// Asks the running loop to pause (kPauseAsked); from any thread. A loop
// not running yet ignores it.
void AskForPause();

// Has the kernel send again the requests a dead daemon read and never
// answered, which wait until then (FUSE_NOTIFY_RESEND); their ids come
// with bit 63 set. Any holder of the connection may ask.
absl::Status ResendInFlightRequests(fuse_session* session);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_SESSION_LOOP_H_
