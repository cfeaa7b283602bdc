#include "fs/daemon/option_table.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <iterator>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "alloc/base/sizes.h"

namespace cudafs {
namespace {

using Apply = decltype(MountOptionSpec::apply);

constexpr uint64_t kSmallestMinBlock = 4 * kKiB;
constexpr uint64_t kLargestMinBlock = kGiB;
// Beyond this the buffers (max_request each, per CPU) cost more than any measured gain.
constexpr uint64_t kMostUringDepth = 64;

// Text from the command line is escaped so that every message stays on one
// line whatever the user typed.
absl::Status BadValue(absl::string_view name, absl::string_view value, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrFormat("bad value for %s=: \"%s\" (%s)", name, absl::CHexEscape(value), expected));
}

// Digits only: from_chars takes no sign, space or base prefix for unsigned
// types. Overflow reads as nullopt.
std::optional<uint64_t> ParseDecimal(absl::string_view text) {
  uint64_t value;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// ParseByteCount for option `name`, whose message names the option.
absl::StatusOr<uint64_t> ParseByteCountOption(absl::string_view name, absl::string_view value,
                                              absl::string_view expected) {
  absl::StatusOr<uint64_t> count = ParseByteCount(value);
  if (count.ok()) return count;
  return BadValue(name, value, absl::IsOutOfRange(count.status()) ? "too large" : expected);
}

// A byte count (or a count with the same suffixes), `expected` in messages.
auto ByteCount(absl::string_view expected) {
  return [expected](absl::string_view name, absl::string_view value) {
    return ParseByteCountOption(name, value, expected);
  };
}

// "50", "12.5": digits with an optional fraction. from_chars alone would
// also take a sign, "inf" and exponents.
std::optional<double> ParsePercent(absl::string_view text) {
  if (!absl::c_all_of(text, [](char c) { return absl::ascii_isdigit(c) || c == '.'; })) {
    return std::nullopt;
  }
  double value;
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// cache=: 0 (none) or at least a page, the cache's unit: a smaller budget
// would be taken as none without a word.
absl::StatusOr<uint64_t> ParseCacheBytes(absl::string_view name, absl::string_view value) {
  constexpr absl::string_view kExpected =
      "expected a byte count with an optional k/m/g suffix, 0 for none";
  absl::StatusOr<uint64_t> bytes = ParseByteCountOption(name, value, kExpected);
  if (bytes.ok() && *bytes != 0 && *bytes < 4 * kKiB) {
    return BadValue(name, value, "less than one 4 KiB page: 0 turns the cache off");
  }
  return bytes;
}

// nr_inodes=: the root takes one inode, so 1 would leave none for any file.
absl::StatusOr<uint64_t> ParseInodeCount(absl::string_view name, absl::string_view value) {
  absl::StatusOr<uint64_t> count = ParseByteCountOption(
      name, value, "expected a count with an optional k/m/g suffix, 0 for unlimited");
  if (count.ok() && *count == 1) {
    return BadValue(name, value, "the root directory takes the only inode: at least 2");
  }
  return count;
}

absl::StatusOr<SizeSpec> ParseSizeSpec(absl::string_view name, absl::string_view value,
                                       bool zero_allowed, bool over_100_percent_allowed) {
  constexpr absl::string_view kExpected =
      "expected bytes with an optional k/m/g/t/p/e suffix or a percentage";
  absl::string_view number = value;
  if (absl::ConsumeSuffix(&number, "%")) {
    const std::optional<double> percent = ParsePercent(number);
    if (!percent) return BadValue(name, value, kExpected);
    if (!(*percent > 0)) return BadValue(name, value, "a percentage must be more than 0");
    if (*percent > 100 && !over_100_percent_allowed) {
      return BadValue(name, value, "a percentage must be at most 100");
    }
    return SizeSpec{.bytes = std::nullopt, .percent = *percent};
  }
  const absl::StatusOr<uint64_t> bytes = ParseByteCountOption(name, value, kExpected);
  if (!bytes.ok()) return bytes.status();
  if (*bytes == 0 && !zero_allowed) return BadValue(name, value, "must be more than 0");
  return SizeSpec{.bytes = *bytes, .percent = std::nullopt};
}

// size= is a limit, not a reservation, as tmpfs's: it takes any share of
// the device's memory, and any byte count, as tmpfs does of RAM; past the
// device, the device bounds it (MountPlan::Capacity).
absl::StatusOr<SizeSpec> ParseSize(absl::string_view name, absl::string_view value) {
  return ParseSizeSpec(name, value, /*zero_allowed=*/false, /*over_100_percent_allowed=*/true);
}

// reserve= and spill=, where 0 turns the feature off, are shares of memory
// that is there: at most all of it.
absl::StatusOr<SizeSpec> ParseSizeOrZero(absl::string_view name, absl::string_view value) {
  return ParseSizeSpec(name, value, /*zero_allowed=*/true, /*over_100_percent_allowed=*/false);
}

absl::StatusOr<mode_t> ParseMode(absl::string_view name, absl::string_view value) {
  // Leading zeros are common ("01777"); past them, at most four octal digits
  // keep the value within 07777.
  absl::string_view digits = value;
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 4 ||
      !absl::c_all_of(digits, [](char c) { return c >= '0' && c <= '7'; })) {
    return BadValue(name, value, "expected octal permission bits, at most 7777");
  }
  mode_t mode = 0;
  for (char c : digits) mode = mode * 8 + (c - '0');
  return mode;
}

// uid= and gid=. (Id)-1 is refused: chown(2) reads it as "leave unchanged".
template <typename Id>
absl::StatusOr<Id> ParseId(absl::string_view name, absl::string_view value) {
  const std::optional<uint64_t> id = ParseDecimal(value);
  if (!id || *id >= std::numeric_limits<Id>::max()) {
    return BadValue(
        name, value,
        absl::StrFormat("expected a decimal id from 0 to %d", std::numeric_limits<Id>::max() - 1));
  }
  return static_cast<Id>(*id);
}

// One of a few words, exactly as written; the message lists them
// ("expected auto, on or off").
template <typename T>
auto OneOf(std::vector<std::pair<absl::string_view, T>> choices) {
  return [choices = std::move(choices)](absl::string_view name,
                                        absl::string_view value) -> absl::StatusOr<T> {
    for (const auto& [word, choice] : choices) {
      if (value == word) return choice;
    }
    std::string expected = "expected ";
    for (size_t i = 0; i < choices.size(); ++i) {
      const char* separator = i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ";
      absl::StrAppend(&expected, separator, choices[i].first);
    }
    return BadValue(name, value, expected);
  };
}

// Only the shape is checked here; whether the devices exist is the
// backend's business once the mount starts.
absl::StatusOr<std::string> ParseDevice(absl::string_view name, absl::string_view value) {
  if (value == "all") return std::string(value);
  const auto gpu = [](absl::string_view item) {
    return !item.empty() && absl::c_all_of(item, [](char c) {
      return absl::ascii_isxdigit(c) || c == ':' || c == '.';
    });
  };
  const bool plausible =
      !value.empty() && absl::c_all_of(absl::StrSplit(value, absl::ByAnyChar("+,")), gpu);
  if (plausible) return std::string(value);
  return BadValue(name, value,
                  "expected all, or GPU indices or PCI bus ids like 0000:3b:00.0 joined by +");
}

// gpu_idle=: seconds (a fraction allowed) up to a day, or never.
absl::StatusOr<absl::Duration> ParseGpuIdle(absl::string_view name, absl::string_view value) {
  if (value == "never") return absl::InfiniteDuration();
  const std::optional<double> seconds = ParsePercent(value);
  if (!seconds || *seconds > 86400) {
    return BadValue(name, value, "expected seconds from 0 to 86400, or never");
  }
  return absl::Seconds(*seconds);
}

absl::StatusOr<uint64_t> ParseMinBlock(absl::string_view name, absl::string_view value) {
  constexpr absl::string_view kExpected = "expected a power of two from 4k to 1g";
  const absl::StatusOr<uint64_t> bytes = ParseByteCountOption(name, value, kExpected);
  if (!bytes.ok()) return bytes.status();
  if (!std::has_single_bit(*bytes) || *bytes < kSmallestMinBlock || *bytes > kLargestMinBlock) {
    return BadValue(name, value, kExpected);
  }
  return *bytes;
}

absl::StatusOr<uint64_t> ParseMaxRequest(absl::string_view name, absl::string_view value) {
  const std::string expected =
      absl::StrFormat("expected a power of two from %dk to %dm", kSmallestMaxRequest / kKiB,
                      kLargestMaxRequest / kMiB);
  const absl::StatusOr<uint64_t> bytes = ParseByteCountOption(name, value, expected);
  if (!bytes.ok()) return bytes.status();
  if (!std::has_single_bit(*bytes) || *bytes < kSmallestMaxRequest ||
      *bytes > kLargestMaxRequest) {
    return BadValue(name, value, expected);
  }
  return *bytes;
}

absl::StatusOr<uint32_t> ParseUringDepth(absl::string_view name, absl::string_view value) {
  const std::optional<uint64_t> depth = ParseDecimal(value);
  if (!depth || *depth < 1 || *depth > kMostUringDepth) {
    return BadValue(name, value, absl::StrFormat("expected a count from 1 to %d", kMostUringDepth));
  }
  return static_cast<uint32_t>(*depth);
}

// An option whose value `parse(name, value)` turns into `field`.
template <auto field, typename Parse>
Apply Into(Parse parse) {
  return [parse = std::move(parse)](absl::string_view name, absl::string_view value,
                                    OptionTarget& target) -> absl::Status {
    auto parsed = parse(name, value);
    if (!parsed.ok()) return parsed.status();
    target.options->*field = *std::move(parsed);
    return absl::OkStatus();
  };
}

// A flag that sets `field` to `value`.
template <auto field, typename T>
Apply Sets(T value) {
  return [value](absl::string_view, absl::string_view, OptionTarget& target) {
    target.options->*field = value;
    return absl::OkStatus();
  };
}

absl::Status SetFsname(absl::string_view name, absl::string_view value, OptionTarget& target) {
  if (value.empty()) return BadValue(name, value, "expected a name");
  target.fsname = std::string(value);
  return absl::OkStatus();
}

const std::vector<MountOptionSpec>& Table() {
  using enum OptionSection;
  using enum OptionValue;
  using Uring = MountOptions::Uring;
  static const auto* const table = new std::vector<MountOptionSpec>{
      {.names = "size",
       .value = kRequired,
       .apply = Into<&MountOptions::size>(ParseSize),
       .forms = {{.syntax = "size=N[k|m|g|t|p|e]",
                  .help = "capacity",
                  .readme = "Rounded up to `min_block` (4 KiB by default, like tmpfs's page); "
                            "`df` shows exactly that. A limit, not a reservation: it may exceed "
                            "the memory free at mount time (as with tmpfs), and writes that "
                            "cannot be backed fail with ENOSPC. Past the device's memory it is "
                            "accepted, as tmpfs accepts any size, and the device's memory is "
                            "the limit `df` shows"},
                 {.syntax = "size=P%",
                  .help = "capacity as a share of the device's memory, P > 0\n"
                          "(past 100%, the device's memory)"}},
       .default_text = "50% of the device's memory"},
      {.names = "nr_inodes",
       .value = kRequired,
       .apply = Into<&MountOptions::nr_inodes>(ParseInodeCount),
       .forms = {{.syntax = "nr_inodes=N[k|m|g]",
                  .help = "most files, 0 for unlimited",
                  .readme = "Extra hard links and extended attributes take inode space too "
                            "(see *Semantics*)"}},
       .default_text = "one per 4 KiB of size, at least 64"},
      {.names = "mode",
       .value = kRequired,
       .apply = Into<&MountOptions::mode>(ParseMode),
       .forms = {{.syntax = "mode=OCTAL", .help = "permissions of the root directory"}},
       .default_value = "1777"},
      {.names = "uid",
       .value = kRequired,
       .apply = Into<&MountOptions::uid>(ParseId<uid_t>),
       .forms = {{.syntax = "uid=N", .help = "owner of the root directory"}},
       .default_text = "the mounting user"},
      {.names = "gid",
       .value = kRequired,
       .apply = Into<&MountOptions::gid>(ParseId<gid_t>),
       .forms = {{.syntax = "gid=N", .help = "group of the root directory"}},
       .default_text = "the mounting user's"},
      {.names = "backend",
       .value = kRequired,
       .apply = Into<&MountOptions::backend>(OneOf<BackendKind>({{"auto", BackendKind::kAuto},
                                                                 {"cuda", BackendKind::kCuda},
                                                                 {"host", BackendKind::kHost},
                                                                 {"null", BackendKind::kNull}})),
       .forms = {{.syntax = "backend=auto|cuda|host",
                  .help = "where data lives; auto: the GPU, else host memory",
                  .readme = "Falling back to host memory, `auto` says so in a one-line notice"},
                 {.syntax = "backend=null",
                  .help = "store nothing (reads return zeros): measures FUSE's own cost",
                  .readme = "Writes are dropped: the benchmarks' floor"}},
       .default_value = "auto"},
      {.names = "device",
       .value = kRequired,
       .apply = Into<&MountOptions::device>(ParseDevice),
       .forms = {{.syntax = "device=N|BUS_ID",
                  .help = "GPU index or PCI bus id like 0000:3b:00.0",
                  .readme = "`cudafs --list-devices` lists them"},
                 {.syntax = "device=all|N+N...",
                  .help = "several GPUs as one mount: every GPU, or those named",
                  .readme = "size= is then of the sum; large files are striped over the GPUs in "
                            "32 MiB extents, small ones kept whole on the GPU with the most room "
                            "(see *Several GPUs*)"}},
       // Not a value: unset, the backend takes its first device.
       .default_text = "0"},
      {.names = "reserve",
       .value = kRequired,
       .apply = Into<&MountOptions::reserve>(ParseSizeOrZero),
       .forms = {{.syntax = "reserve=N[k|m|g|t]|P%",
                  .help = "of each GPU's memory, kept free for other programs: data\n"
                          "moves to host memory when they take it (0: never)",
                  .readme = "Writes that would need it go to another GPU of the mount or to "
                            "host memory; when another program's allocations leave less free, "
                            "the least recently used data moves to host memory until it is "
                            "free again (see *Giving memory back*)"}},
       .default_text = "10%"},
      {.names = "spill",
       .value = kRequired,
       .apply = Into<&MountOptions::spill>(ParseSizeOrZero),
       .forms = {{.syntax = "spill=N[k|m|g|t]|P%",
                  .help = "of host memory, for file data the GPUs give up or have\n"
                          "no room for (0: none; then writes past the GPU's room\n"
                          "fail with ENOSPC and nothing is given back)",
                  .readme = "size= still bounds all the data, wherever it lives; memory is "
                            "taken only while data is there, as tmpfs takes it"}},
       .default_text = "50%"},
      {.names = "spill_ready",
       .value = kRequired,
       .apply = Into<&MountOptions::spill_ready>(
           ByteCount("expected a byte count with an optional k/m/g/t suffix, 0 for none")),
       .forms = {{.syntax = "spill_ready=N[k|m|g|t]",
                  .help = "host memory kept pinned ahead while the GPUs hold that\n"
                          "much data, so that as much leaves them at once (0: none)",
                  .readme = "Past it, data leaves as fast as the daemon commits and pins "
                            "fresh host memory ahead of the copies; each byte costs a byte of "
                            "host memory while the GPUs hold data (see *Giving memory back*)"}},
       .default_text = "up to 1 GiB, only while a GPU has less than twice its reserve free"},
      {.names = "gpu_idle",
       .value = kRequired,
       .apply = Into<&MountOptions::gpu_idle>(ParseGpuIdle),
       .forms = {{.syntax = "gpu_idle=SECONDS|never",
                  .help = "release the CUDA context and all GPU memory once nothing\n"
                          "has been stored for this long; never keeps them",
                  .readme = "A mount holds no context until the first byte of file data, "
                            "so an idle mount costs the GPU nothing and lists no process in "
                            "`nvidia-smi`; the first write after a release makes the context "
                            "again (see *Data path*)"}},
       .default_text = "5"},
      {.names = "min_block",
       .value = kRequired,
       .apply = Into<&MountOptions::min_block>(ParseMinBlock),
       .forms = {{.syntax = "min_block=N[k|m|g]",
                  .help = "smallest allocation, a power of two, 4k to 1g"}},
       .default_value = "4k"},
      {.names = "direct_io_min",
       .value = kRequired,
       .apply = Into<&MountOptions::direct_io_min>(
           ByteCount("expected a byte count with an optional k/m/g suffix")),
       .forms = {{.syntax = "direct_io_min=N[k|m|g]",
                  .help = "files of at least N bytes when opened, and O_DIRECT opens,\n"
                          "bypass the kernel's page cache (large streams: no second copy\n"
                          "in RAM); smaller files go through it, where re-reads cost\n"
                          "nothing",
                  .readme = "Direct-I/O files can be mmapped with libfuse ≥ 3.18 on kernels "
                            "≥ 6.6 (see *Data path*)"}},
       .default_text = "1m where the kernel and libfuse allow\n"
                       "shared mmap of direct-I/O files, else none"},
      {.names = "direct_io",
       .apply = Sets<&MountOptions::direct_io_min>(uint64_t{0}),
       .forms = {{.help = "every file bypasses the kernel's page cache (direct_io_min=0)"}}},
      {.names = "nodirect_io",
       .apply = Sets<&MountOptions::direct_io_min>(kNeverDirectIo),
       .forms = {{.help = "every file goes through the kernel's page cache"}}},
      {.names = "zero_message_open",
       .apply = Sets<&MountOptions::zero_message_open>(true),
       .forms = {{.help = "opening and closing an existing file cost no request, so it\n"
                          "goes through the page cache whatever its size: re-reading a\n"
                          "tree is nearly as fast as on tmpfs, reading large files is\n"
                          "slower; not with direct_io or direct_io_min=",
                  .readme = "See *Data path*"}}},
      {.names = "cache",
       .value = kRequired,
       .apply = Into<&MountOptions::cache_bytes>(ParseCacheBytes),
       .forms = {{.syntax = "cache=N[k|m|g]",
                  .help = "host-side write-back cache for small reads and writes, in\n"
                          "pinned memory; 0 turns it off",
                  .readme = "On a GPU it saves a trip per small request; in host memory "
                            "(backend=host, or auto without a GPU) it is one more copy, and "
                            "slower. See *Data path*"}},
       .default_text = "64m on a GPU,\nnone in host memory"},
      {.names = "uring",
       .value = kRequired,
       .apply = Into<&MountOptions::uring>(
           OneOf<Uring>({{"auto", Uring::kAuto}, {"on", Uring::kOn}, {"off", Uring::kOff}})),
       .forms = {{.syntax = "uring=auto|on|off",
                  .help = "FUSE over io_uring: auto uses it when the kernel offers it\n"
                          "(/sys/module/fuse/parameters/enable_uring is Y)",
                  .readme = "Otherwise requests come over `/dev/fuse`; `on` refuses to mount "
                            "without io_uring (see *Data path*)"}},
       .default_value = "auto"},
      {.names = "survive",
       .value = kRequired,
       .apply = Into<&MountOptions::survive>(OneOf<bool>({{"on", true}, {"off", false}})),
       .forms = {{.syntax = "survive=on|off",
                  .help = "keep the files across a crash of the daemon: a keeper\n"
                          "process starts another, which takes the mount over; over\n"
                          "/dev/fuse, in host memory or on GPUs (with spill=0)",
                  .readme = "Every change to the metadata is journaled in memory the keeper "
                            "holds; requests in flight at the crash are sent again. See "
                            "*Surviving a crash*"}},
       .default_value = "off"},
      {.names = "uring_depth",
       .value = kRequired,
       .apply = Into<&MountOptions::uring_depth>(ParseUringDepth),
       .forms = {{.syntax = "uring_depth=N",
                  .help = "requests in flight per CPU over io_uring, 1 to 64",
                  .readme = "Each costs a buffer of `max_request` bytes in host memory"}},
       .default_text = "4 up to max_request=2m, 2 from 4m\n(8 MiB of buffers per CPU)"},
      {.names = "max_request",
       .value = kRequired,
       .apply = Into<&MountOptions::max_request>(ParseMaxRequest),
       .forms = {{.syntax = "max_request=N[k|m]",
                  .help = "largest read or write request, a power of two, 128k to 16m;\n"
                          "as root, raises /proc/sys/fs/fuse/max_pages_limit (host-wide)\n"
                          "when it is lower, else takes what the kernel allows",
                  .readme = "Larger requests mean fewer round trips per byte; each worker "
                            "and io_uring entry holds a buffer of this size (see *Data path*)"}},
       .default_value = "4m"},
      {.names = "noatime",
       .apply = Sets<&MountOptions::noatime>(true),
       .forms = {{.help = "do not update access times"}}},
      {.names = "atime,relatime,strictatime,norelatime",
       .apply = Sets<&MountOptions::noatime>(false),
       .forms = {{.help = "update access times",
                  .readme = "Access times follow relatime whichever is given"}},
       .is_default = true},
      // The kernel enforces ro: the core refuses no write itself.
      {.names = "ro",
       .forward = true,
       .forms = {{.help = "mount read-only"}}},
      {.names = "rw",
       .forward = true,
       .forms = {{.help = "mount read-write"}},
       .is_default = true},

      {.names = "allow_other",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "let other users access the mount (the modes still decide);\n"
                          "implied when root mounts",
                  .readme = "Needs `user_allow_other` in `/etc/fuse.conf` for non-root"}}},
      {.names = "noallow_other",
       .section = kFuse,
       .apply = Sets<&MountOptions::noallow_other>(true),
       .forms = {{.help = "a mount by root lets only root in",
                  .readme = "Without it a mount by root is open to everyone as tmpfs is, "
                            "and `mode=` keeps others out"}}},
      {.names = "allow_root",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "let root access the mount"}}},
      {.names = "auto_unmount",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "unmount when cudafs exits",
                  .readme = "Also when the daemon is killed. Root's mounts are watched by a "
                            "small process of cudafs's own (`cudafs-unmount`), no setuid helper; "
                            "other users' by `fusermount3`"}}},
      // Always on: the FUSE glue passes it itself.
      {.names = "default_permissions",
       .section = kFuse,
       .forms = {{.help = "let the kernel check permissions (always on)"}}},
      {.names = "suid,nosuid",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "honor or ignore set-user-id bits",
                  .readme = "Mounts are `nosuid,nodev` unless told otherwise, from fstab "
                            "too (the `dev,suid` mount.fuse3 adds are not taken as asked)"}}},
      {.names = "dev,nodev",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "honor or ignore device files"}}},
      {.names = "exec,noexec",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "allow or forbid running programs"}}},
      {.names = "sync,async",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "write synchronously or not"}}},
      {.names = "dirsync",
       .section = kFuse,
       .forward = true,
       .forms = {{.help = "change directories synchronously"}}},
      {.names = "fsname",
       .section = kFuse,
       .value = kRequired,
       .apply = SetFsname,
       .forms = {{.syntax = "fsname=NAME",
                  .help = "same as SOURCE",
                  .readme = "Given both, it wins; commas in either are part of the name, "
                            "never more options"}}},

      // Words for mount(8) and fstab that mount.fuse3 or mount may pass
      // along; they mean nothing to the filesystem.
      {.names = "defaults,auto,noauto,nofail,_netdev,user,nouser,users,owner,group",
       .section = kIgnored,
       .forms = {{.help = "words for mount(8) and /etc/fstab, accepted and ignored"}}},
      {.names = "comment",
       .section = kIgnored,
       .value = kEither,
       .forms = {{.syntax = "comment=...", .help = "accepted and ignored"}}},
      // x-systemd.automount, x-gvfs-show: meant for other programs.
      {.names = "x-*",
       .section = kIgnored,
       .value = kEither,
       .forms = {{.help = "for other programs (x-systemd.automount), accepted and ignored"}}},

      // libfuse takes max_read= only from a filesystem that repeats the value
      // in its init reply, and otherwise fails the mount after it has
      // appeared; cudafs sizes its requests itself (max_request=).
      {.names = "max_read",
       .section = kRefused,
       .value = kEither,
       .forms = {{.help = "cudafs sizes read requests itself"}}},
      {.names = "subtype",
       .section = kRefused,
       .value = kEither,
       .forms = {{.help = "the type is always fuse.cudafs"}}},
  };
  return *table;
}

bool Accepts(const MountOptionSpec& spec, absl::string_view name) {
  for (absl::string_view accepted : absl::StrSplit(spec.names, ',')) {
    if (absl::ConsumeSuffix(&accepted, "*") ? absl::StartsWith(name, accepted)
                                            : name == accepted) {
      return true;
    }
  }
  return false;
}

// How `form` is written: its syntax, or each of the entry's names.
std::vector<absl::string_view> Spellings(const MountOptionSpec& spec, const OptionForm& form) {
  if (!form.syntax.empty()) return {form.syntax};
  return absl::StrSplit(spec.names, ',');
}

// The help of `spec`'s form `i`, lines broken as --help breaks them; the
// default goes after the first form's.
std::string HelpOf(const MountOptionSpec& spec, size_t i) {
  std::string help(spec.forms[i].help);
  if (i > 0) return help;
  const absl::string_view default_shown =
      spec.default_text.empty() ? spec.default_value : spec.default_text;
  if (!default_shown.empty()) absl::StrAppend(&help, " (default: ", default_shown, ")");
  if (spec.is_default) absl::StrAppend(&help, " (default)");
  return help;
}

// "  name                   help", the help's lines aligned in one column.
void AppendHelpLine(absl::string_view spelling, absl::string_view help, std::string* out) {
  constexpr size_t kIndent = 2;
  constexpr size_t kColumn = 25;
  std::string line = absl::StrCat(std::string(kIndent, ' '), spelling);
  if (line.size() >= kColumn) absl::StrAppend(&line, "\n", std::string(kColumn, ' '));
  line.resize(std::max(line.size(), kColumn), ' ');
  absl::StrAppend(out, line,
                  absl::StrReplaceAll(help, {{"\n", absl::StrCat("\n", std::string(kColumn, ' '))}}),
                  "\n");
}

}  // namespace

absl::Span<const MountOptionSpec> MountOptionTable() { return Table(); }

const MountOptionSpec* FindMountOption(absl::string_view name) {
  const std::vector<MountOptionSpec>& table = Table();
  const auto it = absl::c_find_if(table, [name](const MountOptionSpec& spec) {
    return Accepts(spec, name);
  });
  return it == table.end() ? nullptr : &*it;
}

absl::Status ApplyMountOption(absl::string_view option, OptionTarget& target) {
  const size_t equals = option.find('=');
  const absl::string_view name = option.substr(0, equals);
  const absl::string_view value =
      equals == absl::string_view::npos ? absl::string_view() : option.substr(equals + 1);
  const MountOptionSpec* spec = FindMountOption(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown option \"%s\"", absl::CHexEscape(name)));
  }
  if (spec->value == OptionValue::kNone && equals != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("option \"%s\" takes no value", absl::CHexEscape(name)));
  }
  if (spec->section == OptionSection::kRefused) {
    return absl::InvalidArgumentError(
        absl::StrFormat("option %s= is not supported: %s", name, spec->forms.front().help));
  }
  if (spec->apply) {
    if (absl::Status status = spec->apply(name, value, target); !status.ok()) return status;
  }
  if (spec->forward) target.options->fuse_options.emplace_back(name);
  return absl::OkStatus();
}

std::string MountOptionsHelp() {
  std::string out;
  for (const auto& [section, title] :
       {std::pair{OptionSection::kCudafs, "cudafs options:"},
        std::pair{OptionSection::kFuse, "FUSE options, passed to libfuse:"}}) {
    absl::StrAppend(&out, title, "\n");
    for (const MountOptionSpec& spec : Table()) {
      if (spec.section != section) continue;
      for (size_t i = 0; i < spec.forms.size(); ++i) {
        AppendHelpLine(absl::StrJoin(Spellings(spec, spec.forms[i]), ", "), HelpOf(spec, i), &out);
      }
    }
    out += "\n";
  }
  // The words to ignore, as a list that fills lines.
  constexpr size_t kIndent = 2;
  constexpr size_t kWidth = 79;
  std::vector<absl::string_view> words;
  for (const MountOptionSpec& spec : Table()) {
    if (spec.section != OptionSection::kIgnored) continue;
    for (const OptionForm& form : spec.forms) absl::c_copy(Spellings(spec, form), std::back_inserter(words));
  }
  absl::StrAppend(&out, "Accepted and ignored, for fstab and mount(8):\n");
  std::string line(kIndent, ' ');
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string word = absl::StrCat(words[i], i + 1 < words.size() ? "," : "");
    if (line.size() > kIndent && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(&out, line, "\n");
      line.assign(kIndent, ' ');
    }
    absl::StrAppend(&line, line.size() > kIndent ? " " : "", word);
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

std::string MountOptionsMarkdown() {
  // A table cell holds no line break, and a bar would end it.
  const auto cell = [](absl::string_view text) {
    return absl::StrReplaceAll(text, {{"\n", " "}, {"|", "\\|"}});
  };
  std::string out = "| option | meaning | default |\n|---|---|---|\n";
  for (const MountOptionSpec& spec : Table()) {
    if (spec.section == OptionSection::kRefused) continue;
    for (size_t i = 0; i < spec.forms.size(); ++i) {
      const OptionForm& form = spec.forms[i];
      std::string meaning = cell(form.help);
      if (!form.readme.empty()) absl::StrAppend(&meaning, ". ", cell(form.readme));
      std::string default_shown;
      if (i == 0 && !spec.default_text.empty()) {
        default_shown = cell(spec.default_text);
      } else if (i == 0 && !spec.default_value.empty()) {
        default_shown = absl::StrCat("`", spec.default_value, "`");
      } else if (i == 0 && spec.is_default) {
        default_shown = "yes";
      }
      const std::string option = absl::StrJoin(
          Spellings(spec, form), ", ",
          [&](std::string* to, absl::string_view spelling) { absl::StrAppend(to, "`", cell(spelling), "`"); });
      for (const std::string& column : {option, meaning, default_shown}) {
        absl::StrAppend(&out, "| ", column, column.empty() ? "" : " ");
      }
      out += "|\n";
    }
  }
  return out;
}

std::string RoffEscape(absl::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return absl::StrReplaceAll(out, {{"\u2265", "\\(>="}, {"\u00d7", "\\(mu"}});
}

std::string MountOptionsRoff() {
  std::string out;
  for (const auto& [section, title] :
       {std::pair{OptionSection::kCudafs, "cudafs options"},
        std::pair{OptionSection::kFuse, "FUSE options, passed to libfuse"},
        std::pair{OptionSection::kIgnored, "Accepted and ignored"}}) {
    absl::StrAppend(&out, ".SS ", title, "\n");
    for (const MountOptionSpec& spec : Table()) {
      if (spec.section != section) continue;
      for (size_t i = 0; i < spec.forms.size(); ++i) {
        const OptionForm& form = spec.forms[i];
        std::string text = absl::StrReplaceAll(HelpOf(spec, i), {{"\n", " "}});
        // The README's markup ("`name`", "see *Section*") goes; its
        // sections are the page's own.
        if (!form.readme.empty()) {
          absl::StrAppend(&text, ". ",
                          absl::StrReplaceAll(form.readme, {{"\n", " "}, {"`", ""}, {"*", ""}}));
        }
        absl::StrAppend(&out, ".TP\n.B ", RoffEscape(absl::StrJoin(Spellings(spec, form), ", ")),
                        "\n", RoffEscape(text), "\n");
      }
    }
  }
  return out;
}

}  // namespace cudafs
