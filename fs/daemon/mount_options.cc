#include "fs/daemon/mount_options.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "fs/daemon/option_table.h"

namespace cudafs {
namespace {

// Splits an -o list at its commas, as libfuse does (fuse_opt_parse): a
// backslash takes the next character as it is, so "fsname=a\,b" is one
// option whose value has a comma, and "\\" is a backslash.
std::vector<std::string> SplitOptionList(absl::string_view list) {
  std::vector<std::string> options(1);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '\\' && i + 1 < list.size()) {
      options.back() += list[++i];
    } else if (list[i] == ',') {
      options.emplace_back();
    } else {
      options.back() += list[i];
    }
  }
  return options;
}

absl::Status ApplyOptionList(absl::string_view list, OptionTarget& target) {
  for (const std::string& option : SplitOptionList(list)) {
    // Empty items ("rw,,size=1g", a trailing comma) are harmless slips.
    if (option.empty()) continue;
    if (absl::Status status = ApplyMountOption(option, target); !status.ok()) return status;
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

uint32_t DefaultUringDepth(uint64_t max_request) {
  const uint64_t depth = max_request == 0 ? kMostDefaultUringDepth
                                          : kUringBytesPerQueue / max_request;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(depth, kLeastDefaultUringDepth, kMostDefaultUringDepth));
}

absl::StatusOr<MountOptions> ParseCommandLine(absl::Span<const char* const> argv) {
  MountOptions options;
  OptionTarget target{.options = &options, .fsname = std::nullopt};
  std::vector<absl::string_view> positionals;
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
    if (arg == "--options-markdown") {
      options.action = MountOptions::Action::kOptionsMarkdown;
      return options;
    }
    if (arg == "--manual") {
      options.action = MountOptions::Action::kManual;
      return options;
    }
    if (arg == "--stats") {
      options.action = MountOptions::Action::kStats;
      continue;
    }
    if (arg == "--make-room") {
      options.action = MountOptions::Action::kMakeRoom;
      continue;
    }
    if (arg == "--all" || arg == "--json") {
      options.stats_format = arg == "--all" ? MountOptions::StatsFormat::kAll
                                            : MountOptions::StatsFormat::kJson;
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
      if (absl::Status status = ApplyOptionList(argv[i], target); !status.ok()) {
        return status;
      }
    } else if (absl::StartsWith(arg, "-o")) {
      if (absl::Status status = ApplyOptionList(arg.substr(2), target); !status.ok()) {
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
  if (options.action == MountOptions::Action::kMakeRoom) {
    if (positionals.size() != 2) {
      return absl::InvalidArgumentError("--make-room takes a MOUNTPOINT and a SIZE, or all");
    }
    if (positionals[1] != "all") {
      absl::StatusOr<uint64_t> bytes = ParseByteCount(positionals[1]);
      if (!bytes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--make-room: ", bytes.status().message()));
      }
      options.make_room_bytes = *bytes;
    }
    options.mountpoint = std::string(positionals[0]);
    return options;
  }
  if (options.action != MountOptions::Action::kStats &&
      options.stats_format != MountOptions::StatsFormat::kSummary) {
    return absl::InvalidArgumentError("--all and --json go with --stats");
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
  if (target.fsname) options.source = *std::move(target.fsname);
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
       %1$s --help | --version | --list-devices | --stats [--all|--json] MOUNTPOINT
       %1$s --make-room MOUNTPOINT SIZE|all

Mounts a filesystem that keeps file data in GPU memory. SOURCE is the name
shown in /proc/mounts and df (default: cudafs).

General options:
  -h, --help             print this help and exit
  -V, --version          print the version and exit
  --list-devices         list the GPUs cudafs can use and exit
  --stats MOUNTPOINT     print a mounted cudafs's use in one line: space, files,
                         device memory held, transport, cache hit rate
  --stats --all MOUNTPOINT   every counter, one "name value" line each
  --stats --json MOUNTPOINT  every counter and the space figures, as JSON
  --make-room MOUNTPOINT SIZE|all
                         move data off the mount's GPUs to host memory until SIZE
                         (N[k|m|g|t]) is free on each, or all it can; returns then
  -f                     stay in the foreground
  -d                     print FUSE debug output (implies -f)
  -s                     handle one request at a time
  -o OPT[,OPT...]        mount options, below; -o may repeat

)",
      program) +
         MountOptionsHelp();
}

}  // namespace cudafs
