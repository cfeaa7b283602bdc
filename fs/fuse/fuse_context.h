// What the FUSE glue holds for a session (its libfuse userdata): the
// filesystem, the device whose host buffers carry read replies, the
// session's settings and negotiated features, and the glue's counters.
#ifndef CUDAFS_FS_FUSE_FUSE_CONTEXT_H_
#define CUDAFS_FS_FUSE_FUSE_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "alloc/devices/device.h"
#include "fs/core/filesystem.h"
#include "fs/fuse/control_attributes.h"
#include "fs/fuse/fuse_settings.h"
#include "fs/fuse/negotiation.h"
#include "fs/fuse/request_counters.h"
#include "fs/fuse/uring_buffers.h"

namespace cudafs {

// The glue's counters, for --stats (fs/daemon/control_plane.h).
struct FuseStats {
  // "io_uring" or "/dev/fuse", decided in Init.
  std::atomic<const char*> transport{"/dev/fuse"};
  // Host memory of libfuse's ring entry buffers (one request each): queues
  // × depth × max_write; 0 over /dev/fuse.
  std::atomic<uint64_t> uring_buffer_bytes{0};
  // Host memory of all request buffers: the ring's, the /dev/fuse workers'
  // receive buffers and the per-thread read reply buffers (ReadBuffer, one
  // per worker or ring thread).
  std::atomic<uint64_t> request_buffer_bytes{0};
  // Requests served, by type, over either transport.
  RequestCounters requests;
};

// The session's userdata: what the glue works with. Everything it points
// to must outlive the session.
struct FuseContext {
  FuseContext(Filesystem* filesystem, Device* device, FuseSettings settings,
              UringBuffers* uring_buffers)
      : filesystem(filesystem),
        device(device),
        settings(std::move(settings)),
        uring_buffers(uring_buffers) {}

  Filesystem* const filesystem;
  // Where file data lives: read replies are filled in its host buffers.
  Device* const device;
  const FuseSettings settings;
  Negotiated negotiated;
  FuseStats stats;
  // Registers the ring buffers that read and write requests arrive in.
  UringBuffers* const uring_buffers;
  // Asked first about the root directory's extended attributes (the
  // stats, fault injection); null: every attribute is the Filesystem's.
  ControlAttributes* control = nullptr;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_CONTEXT_H_
