#include "fs/daemon/host_probes.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "alloc/base/log.h"
#include "alloc/base/sizes.h"
#include "fs/fuse/libfuse.h"

namespace cudafs {
std::optional<std::string> ReadHostFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::string text(std::istreambuf_iterator<char>(file), {});
  if (file.bad()) return std::nullopt;
  return text;
}

namespace {

constexpr char kUringParameter[] = "/sys/module/fuse/parameters/enable_uring";
constexpr char kMaxPagesLimit[] = "/proc/sys/fs/fuse/max_pages_limit";

std::optional<uint64_t> ReadHostNumber(const std::string& path) {
  const std::optional<std::string> text = ReadHostFile(path);
  return text ? ParseHostNumber(*text) : std::nullopt;
}

absl::Status WriteHostNumber(const std::string& path, uint64_t value) {
  std::ofstream file(path);
  if (!(file << value << std::endl)) {
    return absl::Status(absl::ErrnoToStatusCode(errno), std::strerror(errno));
  }
  return absl::OkStatus();
}

// Why requests cannot come over io_uring here, or empty when they can: the
// kernel offers it (Linux 6.14 with the fuse module's enable_uring set) and
// libfuse can drive it (3.18).
std::string NoUringReason() {
  if (FUSE_VERSION < FUSE_MAKE_VERSION(3, 18)) {
    return absl::StrCat("libfuse ", fuse_pkgversion(), " cannot use io_uring (needs 3.18)");
  }
  const std::optional<std::string> text = ReadHostFile(kUringParameter);
  return KernelUringRule(kUringParameter, text);
}

// RequestLimitRule on this host.
uint64_t RequestLimit(uint64_t wanted, std::string& note) {
  RequestLimitFacts facts;
  facts.page_size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (FUSE_VERSION < FUSE_MAKE_VERSION(3, 18)) {
    facts.old_libfuse = absl::StrFormat("%d.%d", FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION);
  }
  facts.limit_path = kMaxPagesLimit;
  facts.max_pages_limit = ReadHostNumber(kMaxPagesLimit);
  facts.root = geteuid() == 0;
  return RequestLimitRule(
      wanted, facts, [](uint64_t pages) { return WriteHostNumber(kMaxPagesLimit, pages); }, note);
}

// A generation for this mount's inodes, never 0 (FuseSettings::generation).
uint32_t MountGeneration() {
  std::random_device random;
  uint32_t generation = 0;
  while (generation == 0) generation = random();
  return generation;
}

// The name and parent of process `pid`, from /proc/PID/status; nullopt
// when it is gone or cannot be read.
std::optional<std::pair<std::string, pid_t>> NameAndParent(pid_t pid) {
  const std::optional<std::string> status = ReadHostFile(absl::StrCat("/proc/", pid, "/status"));
  if (!status) return std::nullopt;
  std::string name;
  pid_t parent = 0;
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    if (absl::ConsumePrefix(&line, "Name:")) name = std::string(absl::StripAsciiWhitespace(line));
    if (absl::ConsumePrefix(&line, "PPid:") &&
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &parent)) {
      return std::nullopt;
    }
  }
  return std::pair{name, parent};
}

// Whether mount(8) started this process through mount.fuse3, which
// replaces itself with `/bin/sh -c "cudafs ..."`: the shell either execs
// cudafs (whose parent is then mount) or forks it (its grandparent).
bool StartedByMount() {
  pid_t pid = getppid();
  for (int step = 0; step < 2 && pid > 1; ++step) {
    const std::optional<std::pair<std::string, pid_t>> process = NameAndParent(pid);
    if (!process) return false;
    if (process->first == "mount") return true;
    pid = process->second;
  }
  return false;
}

}  // namespace

MachineFacts ProbeMachine(uint64_t max_request) {
  MachineFacts facts;
  facts.host_memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  facts.no_uring_reason = NoUringReason();
  facts.allowed_max_request = RequestLimit(max_request, facts.request_limit_note);
  facts.uid = getuid();
  facts.gid = getgid();
  facts.generation = MountGeneration();
  facts.started_by_mount = StartedByMount();
  return facts;
}

std::string RaiseReadahead(const std::string& device, uint64_t bytes) {
  const std::string path = absl::StrCat("/sys/class/bdi/", device, "/read_ahead_kb");
  return ReadaheadRule(path, ReadHostNumber(path), bytes, geteuid() == 0,
                       [&path](uint64_t kb) { return WriteHostNumber(path, kb); });
}

void RaiseOpenFileLimit() {
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= files.rlim_max) return;
  files.rlim_cur = files.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
    LogError(absl::StrCat("cannot raise the open-file limit to ", files.rlim_max, ": ",
                          std::strerror(errno)));
  }
}

std::optional<uint64_t> ParseHostNumber(absl::string_view text) {
  uint64_t value;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) return std::nullopt;
  return value;
}

std::string KernelUringRule(absl::string_view path, std::optional<absl::string_view> text) {
  if (!text) return absl::StrCat("this kernel has no FUSE over io_uring (no ", path, ")");
  if (absl::StripAsciiWhitespace(*text) != "Y") {
    return absl::StrCat("FUSE over io_uring is off: ", path, " is not Y (as root: echo Y > ", path,
                        ")");
  }
  return "";
}

uint64_t RequestLimitRule(uint64_t wanted, const RequestLimitFacts& facts,
                          absl::FunctionRef<absl::Status(uint64_t pages)> raise,
                          std::string& note) {
  const uint64_t page = facts.page_size;
  if (!facts.old_libfuse.empty() && wanted > kCompiledMaxPages * page) {
    // Such a libfuse reads requests into a buffer of kCompiledMaxPages
    // pages (plus a header) whatever max_write it grants, and a larger
    // max_write makes every read of /dev/fuse fail with EINVAL. (3.18 caps
    // max_write at its buffer; our patched build raises the buffer: see
    // RunSessionLoop.)
    note = absl::StrFormat("max_request=%dk: libfuse %s reads requests of at most %dk",
                           wanted / kKiB, facts.old_libfuse, kCompiledMaxPages * page / kKiB);
    return kCompiledMaxPages * page;
  }
  const uint64_t pages = (wanted + page - 1) / page;
  // Before the setting existed the kernel's limit was compiled in.
  const uint64_t limit = facts.max_pages_limit.value_or(kCompiledMaxPages);
  if (pages <= limit) return wanted;
  std::string why;
  if (facts.max_pages_limit && facts.root) {
    const absl::Status raised = raise(pages);
    if (raised.ok()) {
      note = absl::StrFormat("raised %s from %d to %d (host-wide) for max_request=%dk",
                             facts.limit_path, limit, pages, wanted / kKiB);
      return wanted;
    }
    why = absl::StrFormat("cannot raise %s from %d: %s", facts.limit_path, limit, raised.message());
  } else {
    why = facts.max_pages_limit
              ? absl::StrCat(facts.limit_path, " is ", limit, "; root may raise it")
              : absl::StrCat("no ", facts.limit_path, ": a kernel before 6.13");
  }
  const uint64_t allowed = limit * page;
  note = absl::StrFormat("max_request=%dk: the kernel allows %dk (%s)", wanted / kKiB,
                         allowed / kKiB, why);
  return allowed;
}

std::string ReadaheadRule(absl::string_view path, std::optional<uint64_t> current_kb,
                          uint64_t bytes, bool root,
                          absl::FunctionRef<absl::Status(uint64_t kb)> raise) {
  if (!current_kb) return absl::StrCat("readahead: cannot read ", path, "; left as is");
  const uint64_t wanted_kb = bytes / kKiB;
  if (*current_kb >= wanted_kb) return "";
  if (!root) {
    return absl::StrFormat("readahead: %d KiB (root may raise %s to %d)", *current_kb, path,
                           wanted_kb);
  }
  if (const absl::Status raised = raise(wanted_kb); !raised.ok()) {
    return absl::StrFormat("readahead: cannot raise %s: %s", path, raised.message());
  }
  return absl::StrFormat("readahead raised from %d to %d KiB (%s)", *current_kb, wanted_kb, path);
}

}  // namespace cudafs
