// What the command line asks of the cudafs binary (command_line.h): what to
// do, and for a mount, the -o options (option_table.cc) and the flags.
// These are the options as given; MountPlan works out the final settings
// from them and the machine.
#ifndef CUDAFS_FS_DAEMON_MOUNT_OPTIONS_H_
#define CUDAFS_FS_DAEMON_MOUNT_OPTIONS_H_

#include <sys/types.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "alloc/base/sizes.h"
#include "alloc/devices/open_device.h"
#include "fs/fuse/kernel_settings.h"

namespace cudafs {

// size=: absolute bytes or a percentage of the device's memory, resolved
// once the device is known.
struct SizeSpec {
  std::optional<uint64_t> bytes;
  std::optional<double> percent;  // (0, 100]
  // Bytes for a device with `device_memory` bytes; `default_percent` when
  // neither is set.
  uint64_t Resolve(uint64_t device_memory, double default_percent) const;
  friend bool operator==(const SizeSpec&, const SizeSpec&) = default;
};

struct MountOptions {
  enum class Action {
    kMount, kHelp, kVersion, kListDevices, kStats, kMakeRoom, kUpgrade, kOptionsMarkdown, kManual
  };
  Action action = Action::kMount;
  // --stats: a one-line summary, every counter (--all), or JSON (--json).
  enum class StatsFormat { kSummary, kAll, kJson };
  StatsFormat stats_format = StatsFormat::kSummary;

  std::string source = "cudafs";  // shown in /proc/mounts and df
  std::string mountpoint;
  // --make-room MOUNTPOINT SIZE: the bytes to make free on each GPU;
  // nullopt: "all".
  std::optional<uint64_t> make_room_bytes;
  bool foreground = false;     // -f
  bool debug = false;          // -d (implies foreground)
  bool single_threaded = false;  // -s

  // What each -o option sets: fs/daemon/option_table.cc, whose defaults
  // (shown in --help) are the ones here (tested).
  SizeSpec size;
  std::optional<uint64_t> nr_inodes;  // 0: unlimited
  mode_t mode = 01777;
  std::optional<uid_t> uid;  // default: the mounting user
  std::optional<gid_t> gid;
  BackendKind backend = BackendKind::kAuto;
  std::string device;       // "all", or indices / PCI bus ids joined by '+'; empty: GPU 0
  SizeSpec reserve;         // of each GPU, kept free; unset: MountPlan's default
  SizeSpec spill;           // of host memory, for data off the GPUs; unset: the default
  // Host memory kept pinned ahead for data leaving the GPUs; unset: as much
  // as their reserves (RoomKeeper::Options::ready).
  std::optional<uint64_t> spill_ready;
  // gpu_idle=: how long the GPU backend keeps its context with nothing
  // stored; InfiniteDuration: never released. Unset: MountPlan's default
  // (set or not matters: it means nothing without a GPU).
  std::optional<absl::Duration> gpu_idle;
  uint64_t min_block = 4096;  // power of two, 4 KiB .. 1 GiB
  bool noatime = false;
  // A mount by root lets only root in (no implied allow_other).
  bool noallow_other = false;
  // direct_io_min=: files at least this large when opened, and O_DIRECT
  // opens, bypass the kernel's page cache (see Negotiated::direct_io_min).
  // direct_io is direct_io_min=0, nodirect_io never. Unset: the default
  // where the kernel and libfuse let direct-I/O files be mmapped, else never.
  std::optional<uint64_t> direct_io_min;  // kNeverDirectIo: nodirect_io
  // zero_message_open: opening an existing file costs no request (no OPEN,
  // no RELEASE: FUSE_CAP_NO_OPEN_SUPPORT), and so it goes through the page
  // cache whatever its size; cannot be combined with direct_io or
  // direct_io_min=.
  bool zero_message_open = false;
  // uring=: how requests reach the daemon. auto: FUSE over io_uring when
  // the kernel offers it (/sys/module/fuse/parameters/enable_uring is Y),
  // /dev/fuse otherwise; on: io_uring or no mount; off: /dev/fuse.
  enum class Uring { kAuto, kOn, kOff };
  Uring uring = Uring::kAuto;
  // uring_depth=: requests in flight per io_uring queue (one queue per CPU).
  // Each costs a buffer of max_request bytes. Unset: DefaultUringDepth.
  std::optional<uint32_t> uring_depth;
  // survive=: a keeper process holds the mount across a crash of its
  // daemon, which journals every change (fs/daemon/keeper.h).
  bool survive = false;
  // max_request=: the largest read or write request the kernel sends, a
  // power of two from 128k to 16m (kernel_settings.h); the kernel may
  // allow less (see RequestLimitRule in host_probes.h).
  uint64_t max_request = kDefaultMaxRequest;
  // cache=: bytes of the host-side write-back page cache; 0 turns it off.
  // Unset: the backend's default (MountPlan::kDefaultGpuCacheBytes).
  std::optional<uint64_t> cache_bytes;

  // Options handed to libfuse unchanged (allow_other, auto_unmount, ro,
  // nosuid, ...), without the leading "-o".
  std::vector<std::string> fuse_options;

  friend bool operator==(const MountOptions&, const MountOptions&) = default;
};

// "4096", "64k", "8G", "1t" (powers of 1024, case-insensitive). Rejects
// empty, negative, fractional and overflowing values.
absl::StatusOr<uint64_t> ParseByteCount(absl::string_view text);

// The fsname= option that hands `source` to libfuse as one name. libfuse
// splits option lists at commas, so a SOURCE like "x,allow_other" would
// otherwise add options; commas and backslashes are escaped the way libfuse
// escapes the options it passes on to fusermount3 (fuse_opt_add_opt_escaped).
std::string FsnameOption(absl::string_view source);

// The io_uring queue depth when uring_depth= is not given: as many requests
// of `max_request` bytes as fit in kUringBytesPerQueue, at least 2, at most
// 4 (kernel_settings.h).
uint32_t DefaultUringDepth(uint64_t max_request);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_MOUNT_OPTIONS_H_
