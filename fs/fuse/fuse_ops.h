// The FUSE low-level operations table. Each operation turns a request into
// one Filesystem call and its result into one reply; no filesystem logic
// lives here.
#ifndef CUDAFS_FS_FUSE_FUSE_OPS_H_
#define CUDAFS_FS_FUSE_FUSE_OPS_H_

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 14)
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "alloc/devices/device.h"
#include "fs/core/filesystem.h"
#include "fs/fuse/control_attributes.h"
#include "fs/fuse/kernel_settings.h"
#include "fs/fuse/request_counters.h"
#include "fs/fuse/uring_buffers.h"

namespace cudafs {

// What the daemon decided before mounting (fs/daemon/mount_plan.h), fixed
// for the session.
struct FuseSettings {
  // How long the kernel may cache names (negative ones too) and
  // attributes: a day. Every change goes through this kernel's FUSE
  // connection, which updates or invalidates its cache itself; what the
  // filesystem changes on its own (an atime moved by an open served from the
  // page cache, set-id bits a write dropped) it reports through
  // FilesystemConfig::attributes_changed, and the glue invalidates the
  // kernel's copy (InvalidateCachedAttributes).
  double attr_timeout = kKernelCacheSeconds;
  double entry_timeout = kKernelCacheSeconds;
  // The direct_io_min= option, if given (see Negotiated::direct_io_min).
  std::optional<uint64_t> requested_direct_io_min;
  // zero_message_open asked for: no OPEN or RELEASE for existing files (the
  // open handler answers ENOSYS, the kernel stops asking and keeps every
  // such file in its page cache); new files still come with CREATE. The
  // kernel may not offer it (Negotiated::zero_message_open).
  bool zero_message_open = false;
  bool cache = false;  // the filesystem has a write-back cache (fsync waits for it)
  // Whether to ask for FUSE over io_uring (the kernel offers it, and
  // libfuse starts rings), and its queue depth.
  bool uring = false;
  uint32_t uring_depth = 0;
  // The largest read or write request (max_write and max_readahead), as the
  // kernel allows it.
  uint64_t max_request = kDefaultMaxRequest;
  // How max_request was fitted to the kernel's page limit, if it had to be:
  // one line for Init to log.
  std::string request_limit_note;
  // The generation of every inode of this mount, different for each mount:
  // inode numbers restart with each mount, so a file handle (NFS) kept from
  // an earlier mount names an inode of this one by number, and the
  // generation makes the kernel refuse it (ESTALE) rather than open
  // whatever file has that number now.
  uint32_t generation = 1;
  // Threads of the /dev/fuse loop (each holds a receive buffer and a read
  // reply buffer of max_request bytes), for the memory line of the log.
  uint32_t workers = 0;
};

// What INIT settled with the kernel. Written by Init, before any other
// request; read-only after.
struct Negotiated {
  // How each open is served (decided per open, see fuse_ops.cc's
  // ChooseDirectIo): with FOPEN_DIRECT_IO every read and write is one
  // request straight to us, in pieces of up to max_request, and no page of
  // file data is kept in host RAM, which is fastest for large streams;
  // through the kernel's page cache re-reads and small reads cost no
  // request at all. Files of at least `direct_io_min` bytes when opened,
  // and O_DIRECT opens, get direct I/O. The kernel refuses shared mmap of
  // direct-I/O files unless the connection negotiates
  // FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6, libfuse 3.18 here), and keeps
  // the page cache coherent with direct writes only then, so without it no
  // file gets direct I/O by default.
  uint64_t direct_io_min = kNeverDirectIo;
  // FuseSettings::zero_message_open, where the kernel can open files
  // without a request.
  bool zero_message_open = false;
  // FUSE_HANDLE_KILLPRIV_V2: the kernel flags each write, truncate and
  // O_TRUNC open whose caller lacks CAP_FSETID. Without it the kernel
  // clears them itself, with a SETATTR of the mode, for everything but
  // direct-I/O writes, where the uid rule of Caller applies (see
  // DataChangerOf in fuse_ops.cc).
  bool kernel_kills_set_id = false;
};

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
  // The mounted session, once there is one: for notifications.
  std::atomic<fuse_session*> session{nullptr};
};

const fuse_lowlevel_ops& FuseOperations();

// Tells the kernel that its cached attributes of `ino` are stale (the
// Filesystem's attributes_changed). Does nothing before the mount.
void InvalidateCachedAttributes(const FuseContext& context, InodeNumber ino);
// Tells the kernel that `ino`'s attributes and cached pages are stale (its
// bytes changed behind FUSE). May wait on the kernel's page locks: never
// from inside a request.
void InvalidateCachedData(const FuseContext& context, InodeNumber ino);

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_OPS_H_
