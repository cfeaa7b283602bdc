#include "fs/daemon/mount_plan.h"

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "alloc/base/sizes.h"

namespace cudafs {
namespace {

// The largest extent a growing file gets: a 128th of the capacity, from
// 1 MiB to 32 MiB, and never below min_block. A large file is then backed
// by GPU allocations of up to 32 MiB (committed far faster per byte than
// 2 MiB granules; see CudaDevice), while the growth slack an open
// file may hold stays a small share of a small mount.
uint64_t MaxExtent(uint64_t capacity, uint64_t min_block) {
  return std::max(std::clamp<uint64_t>(std::bit_floor(capacity / 128), kMiB, 32 * kMiB),
                  min_block);
}

// The options given that only mean something for GPUs, as written.
std::vector<std::string> GpuOptionsGiven(const MountOptions& options) {
  std::vector<std::string> given;
  if (options.reserve.bytes || options.reserve.percent) given.push_back("reserve=");
  if (options.spill.bytes || options.spill.percent) given.push_back("spill=");
  if (options.spill_ready) given.push_back("spill_ready=");
  if (!options.device.empty()) given.push_back("device=");
  if (options.gpu_idle) given.push_back("gpu_idle=");
  return given;
}

// The options libfuse gets: those given, less the "dev" and "suid" that
// mount.fuse3 appends to every list not saying nodev or nosuid (mount(8)'s
// defaults), so that an fstab mount is nosuid,nodev as a command-line one
// is, unless the line itself says suid or dev; and, for a mount by root,
// allow_other: a root mount is for everyone, as tmpfs is, and the kernel
// still checks each access against the modes (default_permissions is
// always on), so mode= keeps others out; noallow_other keeps it root's.
// DESIGN, *Who may use a mount*.
std::vector<std::string> FuseOptions(const MountOptions& options, const MachineFacts& facts) {
  std::vector<std::string> given = options.fuse_options;
  if (facts.started_by_mount) {
    std::vector<std::string> appended;
    if (!absl::c_linear_search(given, "nodev")) appended.push_back("dev");
    if (!absl::c_linear_search(given, "nosuid")) appended.push_back("suid");
    if (given.size() >= appended.size() &&
        std::equal(appended.begin(), appended.end(), given.end() - appended.size())) {
      given.resize(given.size() - appended.size());
    }
  }
  // libfuse refuses allow_root beside allow_other.
  if (facts.uid == 0 && !options.noallow_other && !absl::c_linear_search(given, "allow_other") &&
      !absl::c_linear_search(given, "allow_root")) {
    given.push_back("allow_other");
  }
  return given;
}

}  // namespace

absl::StatusOr<MountPlan> MountPlan::Make(const MountOptions& options,
                                          const MachineFacts& facts) {
  // Pinned memory the kernel cannot page out: a budget beyond half the
  // machine's memory is a typo, not a cache.
  if (options.cache_bytes && *options.cache_bytes > facts.host_memory / 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cache=%d exceeds half of this machine's memory (%d bytes)",
                        *options.cache_bytes, facts.host_memory));
  }
  // Host memory is shared with everything on the machine already: reserve=
  // is about GPUs other programs need. A GPU named where none is used is a
  // mistake to say, not to ignore.
  const bool gpu_less =
      options.backend == BackendKind::kHost || options.backend == BackendKind::kNull;
  if (gpu_less && (options.reserve.bytes || options.reserve.percent)) {
    return absl::InvalidArgumentError(
        "reserve= keeps GPU memory for other programs: this backend has no GPU");
  }
  if (gpu_less && (options.spill.bytes || options.spill.percent)) {
    return absl::InvalidArgumentError(
        "spill= is host memory for data moved off the GPUs: this backend has no GPU");
  }
  if (gpu_less && options.spill_ready) {
    return absl::InvalidArgumentError(
        "spill_ready= is host memory for data moved off the GPUs: this backend has no GPU");
  }
  if (gpu_less && !options.device.empty()) {
    return absl::InvalidArgumentError("device= picks GPUs: this backend has no GPU");
  }
  if (gpu_less && options.gpu_idle) {
    return absl::InvalidArgumentError(
        "gpu_idle= releases a GPU's context: this backend has no GPU");
  }
  if (options.survive) {
    // What a successor could not take over (docs/DESIGN.md, *A daemon that
    // dies, survived*).
    if (options.backend != BackendKind::kHost && options.backend != BackendKind::kCuda) {
      return absl::InvalidArgumentError(
          "survive=on keeps files across a crash in host memory or on GPUs: add backend=host "
          "or backend=cuda");
    }
    if (options.backend == BackendKind::kCuda && options.spill.bytes.value_or(1) != 0) {
      return absl::InvalidArgumentError(
          "survive=on: files the GPUs spill to host memory would die with the daemon (that "
          "memory is its own): add spill=0");
    }
    if (options.uring == MountOptions::Uring::kOn) {
      return absl::InvalidArgumentError(
          "survive=on needs /dev/fuse: the kernel does not send again the requests a dead "
          "daemon's io_uring held (uring=off)");
    }
    if (options.cache_bytes.value_or(0) != 0) {
      return absl::InvalidArgumentError(
          "survive=on needs cache=0: a cached write is in no memory that outlives the daemon");
    }
    if (facts.uid != 0 && absl::c_linear_search(options.fuse_options, "auto_unmount")) {
      return absl::InvalidArgumentError(
          "survive=on: fusermount3 would unmount the mount when its daemon dies "
          "(auto_unmount): drop one of them");
    }
  }
  FuseSettings fuse;
  if (options.uring != MountOptions::Uring::kOff && !options.survive) {
    fuse.uring = facts.no_uring_reason.empty();
    if (!fuse.uring && options.uring == MountOptions::Uring::kOn) {
      return absl::FailedPreconditionError(absl::StrCat("uring=on: ", facts.no_uring_reason));
    }
  }
  fuse.uring_depth = options.uring_depth.value_or(DefaultUringDepth(options.max_request));
  fuse.max_request = facts.allowed_max_request;
  fuse.request_limit_note = facts.request_limit_note;
  fuse.workers = options.single_threaded ? 1 : kWorkerThreads;
  fuse.requested_direct_io_min = options.direct_io_min;
  fuse.zero_message_open = options.zero_message_open;
  fuse.generation = facts.generation;
  MountOptions planned = options;
  planned.fuse_options = FuseOptions(options, facts);
  return MountPlan(std::move(planned), facts, std::move(fuse));
}

absl::StatusOr<uint64_t> MountPlan::Capacity(uint64_t device_memory) const {
  uint64_t size = options_.size.Resolve(device_memory, kDefaultSizePercent);
  if (size < options_.min_block) {
    return absl::InvalidArgumentError(
        absl::StrFormat("size=%d is smaller than min_block=%d", size, options_.min_block));
  }
  // size= is a limit, as tmpfs's, so one past the device is taken; but the
  // arena is reserved at this size, and df would promise space no write can
  // have, so the device's memory bounds it. The null device stores nothing.
  if (options_.backend != BackendKind::kNull) size = std::min(size, device_memory);
  return (size + options_.min_block - 1) / options_.min_block * options_.min_block;
}

FuseSettings MountPlan::FuseSettingsFor(BackendKind backend) const {
  FuseSettings fuse = fuse_;
  fuse.cache = CacheBytes(backend) > 0;
  return fuse;
}

std::string MountPlan::UnusedOptionsNotice(BackendKind backend) const {
  if (options_.backend != BackendKind::kAuto || backend != BackendKind::kHost) return "";
  const std::vector<std::string> given = GpuOptionsGiven(options_);
  if (given.empty()) return "";
  return absl::StrCat("cudafs: ", absl::StrJoin(given, ", "),
                      given.size() == 1 ? " has" : " have",
                      " no effect: without a GPU the files are in host memory");
}

std::string MountPlan::WhyNoRoom(BackendKind backend) const {
  switch (backend) {
    case BackendKind::kHost:
      return options_.backend == BackendKind::kAuto
                 ? "this mount found no usable GPU when it started and keeps its files in host "
                   "memory: it holds no GPU memory to give back"
                 : "this mount keeps its files in host memory (backend=host): it holds no GPU "
                   "memory to give back";
    case BackendKind::kNull:
      return "this mount stores nothing (backend=null): it holds no GPU memory to give back";
    default:
      return "this mount has no host memory to move its data to (spill=0)";
  }
}

uint64_t MountPlan::CacheBytes(BackendKind backend) const {
  // A cached write is in no memory that outlives the daemon.
  const bool none = backend == BackendKind::kHost || options_.survive;
  return options_.cache_bytes.value_or(none ? 0 : kDefaultGpuCacheBytes);
}

FilesystemConfig MountPlan::FilesystemConfigFor(uint64_t capacity, BackendKind backend) const {
  FilesystemConfig config;
  config.root_mode = options_.mode;
  config.root_uid = options_.uid.value_or(facts_.uid);
  config.root_gid = options_.gid.value_or(facts_.gid);
  config.max_inodes = options_.nr_inodes.value_or(
      std::max(capacity / kBytesPerDefaultInode, kLeastDefaultInodes));
  config.max_extent = MaxExtent(capacity, options_.min_block);
  config.update_atime = !options_.noatime;
  config.cache_bytes = CacheBytes(backend);
  // No RELEASE comes under zero_message_open to say when a writer is done.
  config.trim_growth_when_idle = options_.zero_message_open;
  return config;
}

}  // namespace cudafs
