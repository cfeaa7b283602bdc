#include "fs/daemon/command_line.h"

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fs/daemon/option_table.h"

namespace cudafs {
namespace {

using Action = MountOptions::Action;

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

// The flags that answer without mounting, so that the rest of the line
// does not matter.
std::optional<Action> AnswerWithoutMounting(absl::string_view flag) {
  if (flag == "-h" || flag == "--help") return Action::kHelp;
  if (flag == "-V" || flag == "--version") return Action::kVersion;
  if (flag == "--list-devices") return Action::kListDevices;
  if (flag == "--options-markdown") return Action::kOptionsMarkdown;
  if (flag == "--manual") return Action::kManual;
  return std::nullopt;
}

// Applies the flag argv[i] (any but those above and "--"); -o takes the
// next argument, and moves `i` past it.
absl::Status ApplyFlag(absl::Span<const char* const> argv, size_t& i, OptionTarget& target) {
  MountOptions& options = *target.options;
  const absl::string_view flag = argv[i];
  if (flag == "--stats") {
    options.action = Action::kStats;
  } else if (flag == "--make-room") {
    options.action = Action::kMakeRoom;
  } else if (flag == "--upgrade") {
    options.action = Action::kUpgrade;
  } else if (flag == "--all" || flag == "--json") {
    const MountOptions::StatsFormat format =
        flag == "--all" ? MountOptions::StatsFormat::kAll : MountOptions::StatsFormat::kJson;
    // Two ways to print the same counters: taking the last would quietly
    // drop the other, as refused combinations of -o options are not.
    if (options.stats_format != MountOptions::StatsFormat::kSummary &&
        options.stats_format != format) {
      return absl::InvalidArgumentError(
          "--all and --json are two formats of --stats: give one (--json has every counter)");
    }
    options.stats_format = format;
  } else if (flag == "-f") {
    options.foreground = true;
  } else if (flag == "-d") {
    options.debug = true;
    options.foreground = true;
  } else if (flag == "-s") {
    options.single_threaded = true;
  } else if (flag == "-o") {
    if (++i == argv.size()) return absl::InvalidArgumentError("option -o needs an argument");
    return ApplyOptionList(argv[i], target);
  } else if (absl::StartsWith(flag, "-o")) {
    return ApplyOptionList(flag.substr(2), target);
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown flag \"%s\"", absl::CHexEscape(flag)));
  }
  return absl::OkStatus();
}

// --make-room's MOUNTPOINT and SIZE|all.
absl::Status TakeMakeRoomArguments(absl::Span<const absl::string_view> positionals,
                                   MountOptions& options) {
  if (positionals.size() != 2) {
    return absl::InvalidArgumentError("--make-room takes a MOUNTPOINT and a SIZE, or all");
  }
  if (positionals[1] != "all") {
    absl::StatusOr<uint64_t> bytes = ParseByteCount(positionals[1]);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--make-room: ", bytes.status().message()));
    }
    options.make_room_bytes = *bytes;
  }
  options.mountpoint = std::string(positionals[0]);
  return absl::OkStatus();
}

// --stats' and --upgrade's MOUNTPOINT, or a mount's [SOURCE] MOUNTPOINT.
absl::Status TakeMountArguments(absl::Span<const absl::string_view> positionals,
                                MountOptions& options) {
  if (options.action == Action::kStats && positionals.size() != 1) {
    return absl::InvalidArgumentError("--stats takes one MOUNTPOINT");
  }
  if (options.action == Action::kUpgrade && positionals.size() != 1) {
    return absl::InvalidArgumentError("--upgrade takes one MOUNTPOINT");
  }
  if (options.action != Action::kStats &&
      options.stats_format != MountOptions::StatsFormat::kSummary) {
    return absl::InvalidArgumentError("--all and --json go with --stats");
  }
  switch (positionals.size()) {
    case 0:
      return absl::InvalidArgumentError("missing MOUNTPOINT");
    case 1:
      options.mountpoint = std::string(positionals[0]);
      return absl::OkStatus();
    case 2:
      // The kernel refuses a mount with an empty source.
      if (positionals[0].empty()) {
        return absl::InvalidArgumentError("empty SOURCE: name one, or leave it out for \"cudafs\"");
      }
      options.source = std::string(positionals[0]);
      options.mountpoint = std::string(positionals[1]);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("unexpected argument \"%s\": expected at most SOURCE and MOUNTPOINT",
                          absl::CHexEscape(positionals[2])));
  }
}

// What options refuse together.
absl::Status CheckCombinations(const MountOptions& options) {
  // Without an OPEN there is no open reply to ask for direct I/O in.
  if (options.zero_message_open && options.direct_io_min &&
      *options.direct_io_min != kNeverDirectIo) {
    return absl::InvalidArgumentError(
        "zero_message_open serves existing files through the page cache: it cannot be "
        "combined with direct_io or direct_io_min=");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MountOptions> ParseCommandLine(absl::Span<const char* const> argv) {
  MountOptions options;
  OptionTarget target{.options = &options, .fsname = std::nullopt};
  std::vector<absl::string_view> positionals;
  bool only_positionals = false;  // after "--"
  for (size_t i = 1; i < argv.size(); ++i) {
    const absl::string_view arg = argv[i];
    if (only_positionals || !absl::StartsWith(arg, "-") || arg == "-") {
      positionals.push_back(arg);
    } else if (arg == "--") {
      only_positionals = true;
    } else if (const std::optional<Action> action = AnswerWithoutMounting(arg)) {
      options.action = *action;
      return options;
    } else if (absl::Status status = ApplyFlag(argv, i, target); !status.ok()) {
      return status;
    }
  }
  if (options.action == Action::kMakeRoom) {
    if (absl::Status status = TakeMakeRoomArguments(positionals, options); !status.ok()) {
      return status;
    }
    return options;
  }
  if (absl::Status status = TakeMountArguments(positionals, options); !status.ok()) {
    return status;
  }
  // fsname= wins over a positional SOURCE wherever it appears.
  if (target.fsname) options.source = *std::move(target.fsname);
  if (absl::Status status = CheckCombinations(options); !status.ok()) return status;
  return options;
}

std::string UsageText(absl::string_view program) {
  return absl::StrFormat(
      R"(usage: %1$s [SOURCE] MOUNTPOINT [-f] [-d] [-s] [-o OPT[,OPT...]]
       %1$s --help | --version | --list-devices | --stats [--all|--json] MOUNTPOINT
       %1$s --make-room MOUNTPOINT SIZE|all
       %1$s --upgrade MOUNTPOINT
       %1$s run [-o MOUNTPOINT]... -- COMMAND [ARG...]

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
                         (N[k|m|g|t|p|e], as size=) is free on each, or all it
                         can; returns then
  --upgrade MOUNTPOINT   hand the mount to this cudafs binary without unmounting
                         it (after a package upgrade): files, open files and
                         requests carry over; mounts served over /dev/fuse
  run [-o MOUNTPOINT]... -- COMMAND [ARG...]
                         run COMMAND so that its GPU allocations that fail
                         for want of memory wait for the cudafs mounts (or
                         those named) to make room, and are tried again
  -f                     stay in the foreground
  -d                     print FUSE debug output (implies -f)
  -s                     handle one request at a time
  -o OPT[,OPT...]        mount options, below; -o may repeat

)",
      program) +
         MountOptionsHelp();
}

}  // namespace cudafs
