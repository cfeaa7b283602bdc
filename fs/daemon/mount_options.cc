#include "fs/daemon/mount_options.h"

#include <bit>
#include <charconv>
#include <limits>
#include <system_error>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cudafs {
namespace {

constexpr uint64_t kSmallestMinBlock = uint64_t{4} << 10;
constexpr uint64_t kLargestMinBlock = uint64_t{1} << 30;
// Beyond this the buffers (1 MiB each, per CPU) cost more than any measured gain.
constexpr uint64_t kMostUringDepth = 64;

// What a value-less option does. Options taking a value are parsed in
// ApplyOption instead.
enum class FlagEffect {
  kForward, kDrop, kNoatime, kAtime, kReadOnly, kReadWrite, kDirectIo, kCachedIo, kZeroMessageOpen
};

struct Flag {
  absl::string_view name;
  FlagEffect effect;
};

constexpr Flag kFlags[] = {
    {"noatime", FlagEffect::kNoatime},
    {"atime", FlagEffect::kAtime},
    {"relatime", FlagEffect::kAtime},
    {"strictatime", FlagEffect::kAtime},
    {"norelatime", FlagEffect::kAtime},
    // The kernel must see ro/rw too, or it would allow writes we refuse.
    {"direct_io", FlagEffect::kDirectIo},
    {"nodirect_io", FlagEffect::kCachedIo},
    {"zero_message_open", FlagEffect::kZeroMessageOpen},
    {"ro", FlagEffect::kReadOnly},
    {"rw", FlagEffect::kReadWrite},
    {"allow_other", FlagEffect::kForward},
    {"allow_root", FlagEffect::kForward},
    {"auto_unmount", FlagEffect::kForward},
    {"suid", FlagEffect::kForward},
    {"nosuid", FlagEffect::kForward},
    {"dev", FlagEffect::kForward},
    {"nodev", FlagEffect::kForward},
    {"exec", FlagEffect::kForward},
    {"noexec", FlagEffect::kForward},
    {"sync", FlagEffect::kForward},
    {"async", FlagEffect::kForward},
    {"dirsync", FlagEffect::kForward},
    // Always on: the FUSE glue passes it itself.
    {"default_permissions", FlagEffect::kDrop},
    // Words for mount(8) and fstab that mount.fuse3 or mount may pass along;
    // they mean nothing to the filesystem.
    {"defaults", FlagEffect::kDrop},
    {"auto", FlagEffect::kDrop},
    {"noauto", FlagEffect::kDrop},
    {"nofail", FlagEffect::kDrop},
    {"_netdev", FlagEffect::kDrop},
    {"user", FlagEffect::kDrop},
    {"nouser", FlagEffect::kDrop},
    {"users", FlagEffect::kDrop},
    {"owner", FlagEffect::kDrop},
    {"group", FlagEffect::kDrop},
};

const Flag* FindFlag(absl::string_view name) {
  const auto it = absl::c_find_if(kFlags, [name](const Flag& flag) { return flag.name == name; });
  return it == std::end(kFlags) ? nullptr : it;
}

void ApplyFlag(const Flag& flag, MountOptions* options) {
  switch (flag.effect) {
    case FlagEffect::kForward:
      options->fuse_options.emplace_back(flag.name);
      break;
    case FlagEffect::kDrop:
      break;
    case FlagEffect::kNoatime:
      options->noatime = true;
      break;
    case FlagEffect::kAtime:
      options->noatime = false;
      break;
    case FlagEffect::kDirectIo:
      options->direct_io_min = 0;
      break;
    case FlagEffect::kCachedIo:
      options->direct_io_min = kNeverDirectIo;
      break;
    case FlagEffect::kZeroMessageOpen:
      options->zero_message_open = true;
      break;
    case FlagEffect::kReadOnly:
      options->read_only = true;
      options->fuse_options.emplace_back(flag.name);
      break;
    case FlagEffect::kReadWrite:
      options->read_only = false;
      options->fuse_options.emplace_back(flag.name);
      break;
  }
}

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

absl::Status ParseSize(absl::string_view value, SizeSpec* size) {
  constexpr absl::string_view kExpected =
      "expected bytes with an optional k/m/g/t suffix or a percentage";
  absl::string_view number = value;
  if (absl::ConsumeSuffix(&number, "%")) {
    const std::optional<double> percent = ParsePercent(number);
    if (!percent) return BadValue("size", value, kExpected);
    if (!(*percent > 0 && *percent <= 100)) {
      return BadValue("size", value, "a percentage must be more than 0 and at most 100");
    }
    *size = SizeSpec{.bytes = std::nullopt, .percent = *percent};
    return absl::OkStatus();
  }
  const absl::StatusOr<uint64_t> bytes = ParseByteCountOption("size", value, kExpected);
  if (!bytes.ok()) return bytes.status();
  if (*bytes == 0) return BadValue("size", value, "must be more than 0");
  *size = SizeSpec{.bytes = *bytes, .percent = std::nullopt};
  return absl::OkStatus();
}

absl::StatusOr<mode_t> ParseMode(absl::string_view value) {
  // Leading zeros are common ("01777"); past them, at most four octal digits
  // keep the value within 07777.
  absl::string_view digits = value;
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 4 ||
      !absl::c_all_of(digits, [](char c) { return c >= '0' && c <= '7'; })) {
    return BadValue("mode", value, "expected octal permission bits, at most 7777");
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

absl::StatusOr<BackendKind> ParseBackend(absl::string_view value) {
  if (value == "auto") return BackendKind::kAuto;
  if (value == "cuda") return BackendKind::kCuda;
  if (value == "host") return BackendKind::kHost;
  if (value == "null") return BackendKind::kNull;
  return BadValue("backend", value, "expected auto, cuda, host or null");
}

// Only the shape is checked here; whether the device exists is the backend's
// business once the mount starts.
absl::Status CheckDevice(absl::string_view value) {
  const bool plausible = !value.empty() && absl::c_all_of(value, [](char c) {
    return absl::ascii_isxdigit(c) || c == ':' || c == '.';
  });
  if (plausible) return absl::OkStatus();
  return BadValue("device", value, "expected a device index or a PCI bus id like 0000:3b:00.0");
}

absl::StatusOr<uint64_t> ParseMinBlock(absl::string_view value) {
  constexpr absl::string_view kExpected = "expected a power of two from 4k to 1g";
  const absl::StatusOr<uint64_t> bytes = ParseByteCountOption("min_block", value, kExpected);
  if (!bytes.ok()) return bytes.status();
  if (!std::has_single_bit(*bytes) || *bytes < kSmallestMinBlock || *bytes > kLargestMinBlock) {
    return BadValue("min_block", value, kExpected);
  }
  return *bytes;
}

// One item of an -o list. `fsname` is kept apart because it must win over a
// positional SOURCE wherever it appears.
absl::Status ApplyOption(absl::string_view option, MountOptions* options,
                         std::optional<std::string>* fsname) {
  const size_t equals = option.find('=');
  const absl::string_view name = option.substr(0, equals);
  // A missing value reads as an empty one, so "size" alone is reported as a
  // bad value for size=.
  const absl::string_view value =
      equals == absl::string_view::npos ? absl::string_view() : option.substr(equals + 1);

  if (const Flag* flag = FindFlag(name)) {
    if (equals != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("option \"%s\" takes no value", absl::CHexEscape(name)));
    }
    ApplyFlag(*flag, options);
    return absl::OkStatus();
  }
  // x-systemd.automount, x-gvfs-show, comment=...: meant for other programs.
  if (absl::StartsWith(name, "x-") || name == "comment") return absl::OkStatus();

  if (name == "size") return ParseSize(value, &options->size);
  if (name == "nr_inodes") {
    absl::StatusOr<uint64_t> count = ParseByteCountOption(
        "nr_inodes", value, "expected a count with an optional k/m/g suffix, 0 for unlimited");
    if (!count.ok()) return count.status();
    options->nr_inodes = *count;
    return absl::OkStatus();
  }
  if (name == "mode") {
    absl::StatusOr<mode_t> mode = ParseMode(value);
    if (!mode.ok()) return mode.status();
    options->mode = *mode;
    return absl::OkStatus();
  }
  if (name == "uid") {
    absl::StatusOr<uid_t> uid = ParseId<uid_t>("uid", value);
    if (!uid.ok()) return uid.status();
    options->uid = *uid;
    return absl::OkStatus();
  }
  if (name == "gid") {
    absl::StatusOr<gid_t> gid = ParseId<gid_t>("gid", value);
    if (!gid.ok()) return gid.status();
    options->gid = *gid;
    return absl::OkStatus();
  }
  if (name == "backend") {
    absl::StatusOr<BackendKind> backend = ParseBackend(value);
    if (!backend.ok()) return backend.status();
    options->backend = *backend;
    return absl::OkStatus();
  }
  if (name == "device") {
    if (absl::Status status = CheckDevice(value); !status.ok()) return status;
    options->device = std::string(value);
    return absl::OkStatus();
  }
  if (name == "min_block") {
    absl::StatusOr<uint64_t> min_block = ParseMinBlock(value);
    if (!min_block.ok()) return min_block.status();
    options->min_block = *min_block;
    return absl::OkStatus();
  }
  if (name == "cache") {
    absl::StatusOr<uint64_t> bytes = ParseByteCountOption(
        "cache", value, "expected a byte count with an optional k/m/g suffix, 0 for none");
    if (!bytes.ok()) return bytes.status();
    options->cache_bytes = *bytes;
    return absl::OkStatus();
  }
  if (name == "direct_io_min") {
    absl::StatusOr<uint64_t> bytes = ParseByteCountOption(
        "direct_io_min", value, "expected a byte count with an optional k/m/g suffix");
    if (!bytes.ok()) return bytes.status();
    options->direct_io_min = *bytes;
    return absl::OkStatus();
  }
  if (name == "uring") {
    if (value == "auto") {
      options->uring = MountOptions::Uring::kAuto;
    } else if (value == "on") {
      options->uring = MountOptions::Uring::kOn;
    } else if (value == "off") {
      options->uring = MountOptions::Uring::kOff;
    } else {
      return BadValue("uring", value, "expected auto, on or off");
    }
    return absl::OkStatus();
  }
  if (name == "uring_depth") {
    const std::optional<uint64_t> depth = ParseDecimal(value);
    if (!depth || *depth < 1 || *depth > kMostUringDepth) {
      return BadValue("uring_depth", value,
                      absl::StrFormat("expected a count from 1 to %d", kMostUringDepth));
    }
    options->uring_depth = static_cast<uint32_t>(*depth);
    return absl::OkStatus();
  }
  if (name == "fsname") {
    if (value.empty()) return BadValue("fsname", value, "expected a name");
    *fsname = std::string(value);
    return absl::OkStatus();
  }
  // libfuse takes max_read= only from a filesystem that repeats the value in
  // its init reply, and otherwise fails the mount after it has appeared;
  // cudafs sizes its requests itself (up to 1 MiB).
  if (name == "max_read") {
    return absl::InvalidArgumentError(
        "option max_read= is not supported: cudafs sizes read requests itself");
  }
  if (name == "subtype") {
    return absl::InvalidArgumentError(
        "option subtype= is not supported: the type is always fuse.cudafs");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown option \"%s\"", absl::CHexEscape(name)));
}

absl::Status ApplyOptionList(absl::string_view list, MountOptions* options,
                             std::optional<std::string>* fsname) {
  // Empty items ("rw,,size=1g", a trailing comma) are harmless slips.
  for (absl::string_view option : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    if (absl::Status status = ApplyOption(option, options, fsname); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t SizeSpec::Resolve(uint64_t device_memory, double default_percent) const {
  if (bytes) return *bytes;
  // long double holds any uint64_t exactly on x86-64; the clamp covers
  // rounding on platforms where it does not.
  const long double share = static_cast<long double>(device_memory) *
                            static_cast<long double>(percent.value_or(default_percent)) / 100;
  if (share >= static_cast<long double>(device_memory)) return device_memory;
  return static_cast<uint64_t>(share);
}

absl::StatusOr<MountOptions> ParseCommandLine(absl::Span<const char* const> argv) {
  MountOptions options;
  std::vector<absl::string_view> positionals;
  std::optional<std::string> fsname;
  bool only_positionals = false;  // after "--"
  for (size_t i = 1; i < argv.size(); ++i) {
    const absl::string_view arg = argv[i];
    if (only_positionals || !absl::StartsWith(arg, "-") || arg == "-") {
      positionals.push_back(arg);
      continue;
    }
    // These answer without mounting, so the rest of the line does not matter.
    if (arg == "-h" || arg == "--help") {
      options.action = MountOptions::Action::kHelp;
      return options;
    }
    if (arg == "-V" || arg == "--version") {
      options.action = MountOptions::Action::kVersion;
      return options;
    }
    if (arg == "--list-devices") {
      options.action = MountOptions::Action::kListDevices;
      return options;
    }
    if (arg == "--stats") {
      options.action = MountOptions::Action::kStats;
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
    } else if (arg == "-f") {
      options.foreground = true;
    } else if (arg == "-d") {
      options.debug = true;
      options.foreground = true;
    } else if (arg == "-s") {
      options.single_threaded = true;
    } else if (arg == "-o") {
      if (++i == argv.size()) return absl::InvalidArgumentError("option -o needs an argument");
      if (absl::Status status = ApplyOptionList(argv[i], &options, &fsname); !status.ok()) {
        return status;
      }
    } else if (absl::StartsWith(arg, "-o")) {
      if (absl::Status status = ApplyOptionList(arg.substr(2), &options, &fsname); !status.ok()) {
        return status;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown flag \"%s\"", absl::CHexEscape(arg)));
    }
  }

  if (options.action == MountOptions::Action::kStats && positionals.size() != 1) {
    return absl::InvalidArgumentError("--stats takes one MOUNTPOINT");
  }
  switch (positionals.size()) {
    case 0:
      return absl::InvalidArgumentError("missing MOUNTPOINT");
    case 1:
      options.mountpoint = std::string(positionals[0]);
      break;
    case 2:
      // The kernel refuses a mount with an empty source.
      if (positionals[0].empty()) {
        return absl::InvalidArgumentError(
            "empty SOURCE: name one, or leave it out for \"cudafs\"");
      }
      options.source = std::string(positionals[0]);
      options.mountpoint = std::string(positionals[1]);
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("unexpected argument \"%s\": expected at most SOURCE and MOUNTPOINT",
                          absl::CHexEscape(positionals[2])));
  }
  if (fsname) options.source = *std::move(fsname);
  // Without an OPEN there is no open reply to ask for direct I/O in.
  if (options.zero_message_open && options.direct_io_min &&
      *options.direct_io_min != kNeverDirectIo) {
    return absl::InvalidArgumentError(
        "zero_message_open serves existing files through the page cache: it cannot be "
        "combined with direct_io or direct_io_min=");
  }
  return options;
}

std::string FsnameOption(absl::string_view source) {
  std::string option = "fsname=";
  for (char c : source) {
    if (c == ',' || c == '\\') option += '\\';
    option += c;
  }
  return option;
}

absl::StatusOr<uint64_t> ParseByteCount(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    const size_t suffix = absl::string_view("kmgtpe").find(absl::ascii_tolower(digits.back()));
    if (suffix != absl::string_view::npos) {
      shift = 10 * static_cast<int>(suffix + 1);
      digits.remove_suffix(1);
    }
  }
  uint64_t count;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error == std::errc::invalid_argument || end != digits.data() + digits.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a byte count: \"%s\" (expected digits with an optional k/m/g/t/p/e suffix)",
        absl::CHexEscape(text)));
  }
  if (error == std::errc::result_out_of_range ||
      count > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return absl::OutOfRangeError(
        absl::StrFormat("byte count too large: \"%s\"", absl::CHexEscape(text)));
  }
  return count << shift;
}

std::string UsageText(absl::string_view program) {
  return absl::StrFormat(
      R"(usage: %1$s [SOURCE] MOUNTPOINT [-f] [-d] [-s] [-o OPT[,OPT...]]
       %1$s --help | --version | --list-devices | --stats MOUNTPOINT

Mounts a filesystem that keeps file data in GPU memory. SOURCE is the name
shown in /proc/mounts and df (default: cudafs).

General options:
  -h, --help             print this help and exit
  -V, --version          print the version and exit
  --list-devices         list the GPUs cudafs can use and exit
  --stats MOUNTPOINT     print the counters of a mounted cudafs (cache, transport)
  -f                     stay in the foreground
  -d                     print FUSE debug output (implies -f)
  -s                     handle one request at a time
  -o OPT[,OPT...]        mount options, below; -o may repeat

cudafs options:
  size=N[k|m|g|t]        capacity (default: 50%% of the device's memory)
  size=P%%                capacity as a share of the device's memory, 0 < P <= 100
  nr_inodes=N[k|m|g]     most files, 0 for unlimited (default: one per 4 KiB of size)
  mode=OCTAL             permissions of the root directory (default: 1777)
  uid=N                  owner of the root directory (default: the mounting user)
  gid=N                  group of the root directory (default: the mounting user's)
  backend=auto|cuda|host where data lives; auto: the GPU, else host memory (default: auto)
  backend=null           store nothing (reads return zeros): measures FUSE's own cost
  device=N|BUS_ID        GPU index or PCI bus id like 0000:3b:00.0 (default: 0)
  min_block=N[k|m|g]     smallest allocation, a power of two, 4k to 1g (default: 4k)
  direct_io_min=N[k|m|g] files of at least N bytes when opened, and O_DIRECT opens,
                         bypass the kernel's page cache (large streams: no second copy
                         in RAM); smaller files go through it, where re-reads cost
                         nothing (default: 1m where the kernel and libfuse allow
                         shared mmap of direct-I/O files, else none)
  direct_io              every file bypasses the kernel's page cache (direct_io_min=0)
  nodirect_io            every file goes through the kernel's page cache
  zero_message_open      opening and closing an existing file cost no request, so it
                         goes through the page cache whatever its size: re-reading a
                         tree is nearly as fast as on tmpfs, reading large files is
                         slower (see the README)
  cache=N[k|m|g]         host-side write-back cache for small reads and writes, in
                         pinned memory; 0 turns it off (default: 64m)
  uring=auto|on|off      FUSE over io_uring: auto uses it when the kernel offers it
                         (/sys/module/fuse/parameters/enable_uring is Y) (default: auto)
  uring_depth=N          requests in flight per CPU over io_uring, 1 to 64 (default: 4)
  noatime                do not update access times
  atime, relatime, strictatime, norelatime
                         update access times (default)
  ro                     mount read-only
  rw                     mount read-write (default)

FUSE options, passed to libfuse:
  allow_other            let other users access the mount
  allow_root             let root access the mount
  auto_unmount           unmount when cudafs exits
  default_permissions    let the kernel check permissions (always on)
  suid, nosuid           honor or ignore set-user-id bits
  dev, nodev             honor or ignore device files
  exec, noexec           allow or forbid running programs
  sync, async            write synchronously or not
  dirsync                change directories synchronously
  fsname=NAME            same as SOURCE

Accepted and ignored, for fstab and mount(8):
  defaults, auto, noauto, nofail, _netdev, user, nouser, users, owner, group,
  comment=..., x-*
)",
      program);
}

}  // namespace cudafs
