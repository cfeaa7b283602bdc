// What the host offers a mount, asked of the kernel and libfuse: whether
// requests can come over io_uring, the largest request the kernel sends,
// the mount's readahead window, the open-file limit. As root the probes
// raise a host setting that is too low for the mount, never lower one.
//
// Each probe reads its file and hands what it read to a rule below it,
// which decides and says why in one line; the rules write nothing
// themselves (a raise is a function they are given), so the tests feed
// them text and numbers.
#ifndef CUDAFS_FS_DAEMON_HOST_PROBES_H_
#define CUDAFS_FS_DAEMON_HOST_PROBES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fs/daemon/mount_plan.h"

namespace cudafs {

// The text of a /proc or /sys file; nullopt when it cannot be read.
std::optional<std::string> ReadHostFile(const std::string& path);

// What MountPlan::Make needs of the machine for a mount asking for
// `max_request`, found before the daemon forks: host memory, io_uring,
// the request limit (raised as root: see RequestLimitRule), the mounting
// user, a fresh generation, whether mount(8) started it.
MachineFacts ProbeMachine(uint64_t max_request);

// The kernel reads ahead of mmap and buffered readers by the filesystem's
// readahead window, which stays at the VM's default whatever max_readahead
// says (that is only its cap): a safetensors load through mmap then runs
// requests of that size. As root, raises the window of the mount
// (`device`: MAJOR:MINOR) to `bytes`, never lowers it; returns a line
// saying what happened, for the log, or empty when nothing did.
std::string RaiseReadahead(const std::string& device, uint64_t bytes);

// systemd starts services with a soft limit of 1024 open files, for the
// sake of select(2), which cudafs does not use; the hard limit is what the
// machine allows. Each connection of the share service, and each
// descriptor a client sends it, counts against it: the soft limit is
// raised to the hard one (a failure is logged).
void RaiseOpenFileLimit();

// The rules, pure.

// A number as /proc and /sys print it ("256\n"); nullopt for anything else.
std::optional<uint64_t> ParseHostNumber(absl::string_view text);

// Why the kernel offers no FUSE over io_uring, given the text of `path`
// (the fuse module's enable_uring; nullopt: no such file), or empty when
// it does.
std::string KernelUringRule(absl::string_view path, std::optional<absl::string_view> text);

// What RequestLimitRule decides from.
struct RequestLimitFacts {
  uint64_t page_size = 4096;
  // A libfuse before 3.18 reads requests into a buffer of kCompiledMaxPages
  // pages whatever max_write it grants: its version ("3.16"); empty for a
  // later one.
  std::string old_libfuse;
  // The kernel's limit of pages per request, from `limit_path` (a host-wide
  // setting since Linux 6.13); nullopt: no such setting.
  std::string limit_path;
  std::optional<uint64_t> max_pages_limit;
  bool root = false;
};

// The largest request the kernel will send when max_request=`wanted`. As
// root a lower kernel limit is raised to `wanted` through `raise` (which
// writes that many pages), never lowered; otherwise the mount takes what
// the kernel allows. `note` gets a line saying either, for Init to log
// (after the daemon detached: syslog, not the mounting command's stderr).
uint64_t RequestLimitRule(uint64_t wanted, const RequestLimitFacts& facts,
                          absl::FunctionRef<absl::Status(uint64_t pages)> raise, std::string& note);

// The readahead window's change: `current_kb` as read from `path`
// (nullopt: unreadable), `bytes` wanted, raised through `raise` (which
// writes KiB) as root. Returns RaiseReadahead's line.
std::string ReadaheadRule(absl::string_view path, std::optional<uint64_t> current_kb,
                          uint64_t bytes, bool root,
                          absl::FunctionRef<absl::Status(uint64_t kb)> raise);

}  // namespace cudafs

#endif  // CUDAFS_FS_DAEMON_HOST_PROBES_H_
