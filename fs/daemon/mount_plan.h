// MountPlan: the mount's final settings, worked out in one place from the
// options and what the machine offers, for every layer that needs them: the
// arena's size, the filesystem core's configuration, the FUSE glue's
// settings, the session's workers. Pure: the host probes gather the facts
// (host memory, what the kernel allows; the device's memory comes to
// Capacity) and Serve carries the plan out, so every rule here is
// unit-tested.
#ifndef CUDAFS_FS_DAEMON_MOUNT_PLAN_H_
#define CUDAFS_FS_DAEMON_MOUNT_PLAN_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fs/core/filesystem.h"
#include "fs/daemon/mount_options.h"
#include "fs/fuse/fuse_settings.h"

namespace cudafs {

// What the machine offers, found before the device is opened
// (ProbeMachine, host_probes.h).
struct MachineFacts {
  uint64_t host_memory = 0;  // bytes of RAM
  // Why requests cannot come over io_uring (kernel, libfuse), or empty when
  // they can.
  std::string no_uring_reason;
  // The largest request the kernel will send for max_request= (the probe
  // may have raised the kernel's limit to allow it), and a line for the log
  // saying how that was decided, if it had to be.
  uint64_t allowed_max_request = kDefaultMaxRequest;
  std::string request_limit_note;
  uid_t uid = 0;  // the mounting user
  gid_t gid = 0;
  // Drawn at random for each mount (FuseSettings::generation).
  uint32_t generation = 1;
  // mount(8) started cudafs through mount.fuse3 (an fstab line, or
  // `mount -t fuse.cudafs`), which appends "dev" and "suid" to the options.
  bool started_by_mount = false;
};

class MountPlan {
 public:
  // Default size=: this share of the device's memory.
  static constexpr double kDefaultSizePercent = 50;
  // Default reserve=: this share of each GPU stays free for other
  // programs, so that one started after the mount gets its memory with no
  // configuration (the keeper moves data out as it allocates).
  static constexpr double kDefaultReservePercent = 10;
  // Default spill=: this share of host memory may hold data moved off the
  // GPUs, as tmpfs may take half of it.
  static constexpr double kDefaultSpillPercent = 50;
  // Default nr_inodes=: one per this many bytes of size, like a filesystem
  // full of the smallest files it stores efficiently, and at least
  // kLeastDefaultInodes, enough for a tiny mount's empty files and
  // directories (the root takes one).
  static constexpr uint64_t kBytesPerDefaultInode = 4096;
  static constexpr uint64_t kLeastDefaultInodes = 64;
  // Workers serving /dev/fuse (each holds a request in flight, so this
  // bounds the parallel streams whose copies overlap); -s: one.
  static constexpr uint32_t kWorkerThreads = 16;
  // Default cache= on a GPU (and on null, which stands in for one in the
  // benchmarks), where every trip costs microseconds however small. Host
  // memory gets none: there the cache is one more memcpy and loses
  // (DESIGN, *Write-back cache*).
  static constexpr uint64_t kDefaultGpuCacheBytes = 64 * kMiB;
  // Default gpu_idle=: an idle mount gives its GPU context back this soon
  // (DESIGN, *GPU context*), while a program's next write, moments later,
  // does not pay the context again.
  static constexpr absl::Duration kDefaultGpuIdle = absl::Seconds(5);

  // Everything that needs no device: refuses what the machine cannot honor
  // (a cache beyond half its memory, uring=on without io_uring) and GPU
  // options on a backend without GPUs.
  static absl::StatusOr<MountPlan> Make(const MountOptions& options, const MachineFacts& facts);

  // The mount's capacity on a device of `device_memory` bytes: size=
  // rounded up to min_block (as tmpfs rounds to a page). The Arena hands
  // out no more than this. Refuses sizes below one block, or beyond the
  // device (but for the null device, which stores nothing).
  absl::StatusOr<uint64_t> Capacity(uint64_t device_memory) const;

  // The filesystem core's configuration for an arena of `capacity` bytes
  // on `backend`, the one opened (host memory where auto found no GPU).
  FilesystemConfig FilesystemConfigFor(uint64_t capacity, BackendKind backend) const;
  // The FUSE glue's fixed settings on `backend`, the one opened.
  FuseSettings FuseSettingsFor(BackendKind backend) const;
  // For the mount's stderr once `backend` is opened: the GPU options given
  // that it ignores (backend=auto that found no GPU; an explicit backend
  // without GPUs refuses them in Make), or empty.
  std::string UnusedOptionsNotice(BackendKind backend) const;
  // Why a mount on `backend`, the one opened, cannot make room on GPUs
  // when the room keeper has nothing to move data to: for make-room's
  // answer, in the words of what the user set (or did not).
  std::string WhyNoRoom(BackendKind backend) const;

  // The options, with fuse_options as libfuse gets them: less
  // mount.fuse3's automatic dev,suid, plus allow_other for root.
  const MountOptions& options() const { return options_; }

 private:
  MountPlan(MountOptions options, const MachineFacts& facts, FuseSettings fuse)
      : options_(std::move(options)), facts_(facts), fuse_(std::move(fuse)) {}

  // cache=, or its default for `backend`.
  uint64_t CacheBytes(BackendKind backend) const;

  MountOptions options_;
  MachineFacts facts_;
  FuseSettings fuse_;
};

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MOUNT_PLAN_H_
