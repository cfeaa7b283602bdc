// FuseSettings: what the daemon decided for the FUSE glue before mounting
// (fs/daemon/mount_plan.h), fixed for the session. Apart from fuse_context.h so
// that INIT's negotiation (negotiation.h) takes it without libfuse.
#ifndef CUDAFS_FS_FUSE_FUSE_SETTINGS_H_
#define CUDAFS_FS_FUSE_FUSE_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "fs/fuse/kernel_settings.h"

namespace cudafs {

struct FuseSettings {
  // How long the kernel may cache names (negative ones too) and
  // attributes: a day. Every change goes through this kernel's FUSE
  // connection, which updates or invalidates its cache itself; what the
  // filesystem changes on its own (an atime moved by an open served from the
  // page cache, set-id bits a write dropped) it reports to the
  // KernelNotifier (fs/core/kernel_notifier.h), which invalidates the
  // kernel's copy.
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

}  // namespace cudafs

#endif  // CUDAFS_FS_FUSE_FUSE_SETTINGS_H_
